package agentserver_test

import (
	"sync"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/agentserver"
	"github.com/lachesis-sched/lachesis/internal/protocol/munge/mungetest"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
)

func TestJobEndReports(t *testing.T) {
	tests := []struct {
		name     string
		uid      uint32
		rep      wire.JobEndReport
		handler  bool
		wantOK   bool
		wantCall bool
	}{
		{"valid report from root reaches the handler", 0, wire.JobEndReport{Node: "n1", JobID: 5, End: 100}, true, true, true},
		{"report from another uid is refused", 1000, wire.JobEndReport{Node: "n1", JobID: 5, End: 100}, true, false, false},
		{"report of job 0 is refused", 0, wire.JobEndReport{Node: "n1", End: 100}, true, false, false},
		{"report before the core is ready is refused so the agent retries", 0, wire.JobEndReport{Node: "n1", JobID: 5, End: 100}, false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []wire.JobEndReport
			f := start(t, func(c *agentserver.Config) {
				c.OnJobEnd = func(r wire.JobEndReport) bool {
					if !tc.handler {
						return false
					}
					mu.Lock()
					got = append(got, r)
					mu.Unlock()
					return true
				}
			})
			raw, err := wire.EncodeReport(&mungetest.Fake{UID: tc.uid}, wire.TypeJobEnd, &tc.rep)
			if err != nil {
				t.Fatal(err)
			}
			ack, err, _ := f.send(raw)
			if tc.wantOK && (err != nil || !ack.OK || ack.ID != "5@n1") {
				t.Fatalf("ack %+v, %v; want OK for 5@n1", ack, err)
			}
			if !tc.wantOK && ack.OK {
				t.Fatalf("ack %+v; want a refusal", ack)
			}
			mu.Lock()
			defer mu.Unlock()
			if (len(got) == 1) != tc.wantCall {
				t.Fatalf("handler got %v; want a call %v", got, tc.wantCall)
			}
		})
	}
}
