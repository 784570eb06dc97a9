package agentserver_test

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/agentserver"
	"github.com/lachesis-sched/lachesis/internal/protocol/munge/mungetest"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
)

// A job-usage report is taken only from an agent's uid and only when
// valid; a user on a node, signing with their own munge credential,
// cannot describe anyone's job.
func TestJobUsageReports(t *testing.T) {
	valid := wire.JobUsageReport{Node: "n1", At: time.Unix(100, 0), IntervalSec: 10, Jobs: []wire.JobUsage{
		{JobID: 5, UID: 1000, GPUs: []wire.JobGPUUsage{{Index: 0, UtilPct: 40, MemUsedMB: 900, Sharers: 1}}}}}
	nan := valid
	nan.Jobs = []wire.JobUsage{{JobID: 5, UID: 1000, GPUs: []wire.JobGPUUsage{{UtilPct: math.NaN(), Sharers: 1}}}}
	tests := []struct {
		name     string
		uid      uint32
		rep      wire.JobUsageReport
		handler  bool
		wantCall bool
		reason   agentserver.Reason
	}{
		{"valid report from root reaches the handler", 0, valid, true, true, ""},
		{"valid report from SlurmUser reaches the handler", slurmUID, valid, true, true, ""},
		{"report signed by a user's uid is refused", 1000, valid, true, false, agentserver.ReasonUIDNotAllowed},
		{"report with a NaN utilisation is refused", 0, nan, true, false, agentserver.ReasonInvalidReport},
		{"report before the core is ready is refused so the agent retries", 0, valid, false, false, agentserver.ReasonBusy},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []*wire.JobUsageReport
			f := start(t, func(c *agentserver.Config) {
				c.OnJobUsage = func(r *wire.JobUsageReport) bool {
					if !tc.handler {
						return false
					}
					mu.Lock()
					got = append(got, r)
					mu.Unlock()
					return true
				}
			})
			raw, err := wire.EncodeReport(&mungetest.Fake{UID: tc.uid}, wire.TypeJobUsage, &tc.rep)
			if err != nil {
				t.Fatal(err)
			}
			ack, err, _ := f.send(raw)
			if tc.reason == "" && (err != nil || !ack.OK || ack.ID != "n1") {
				t.Fatalf("ack %+v, %v; want OK for n1", ack, err)
			}
			if tc.reason != "" {
				if ack.OK {
					t.Fatalf("ack %+v; want a refusal", ack)
				}
				f.waitRejection(tc.reason)
			}
			mu.Lock()
			defer mu.Unlock()
			if (len(got) == 1) != tc.wantCall {
				t.Fatalf("handler got %v; want a call %v", got, tc.wantCall)
			}
			if tc.wantCall && (got[0].Jobs[0].JobID != 5 || got[0].Jobs[0].GPUs[0].UtilPct != 40) {
				t.Fatalf("handler got %+v", got[0])
			}
		})
	}
}
