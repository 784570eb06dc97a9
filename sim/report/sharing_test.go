package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/sim"
)

func sharingResults() []*sim.Result {
	mk := func(label string, on bool, jct, useful, work float64) *sim.Result {
		return &sim.Result{Label: label, Policy: "gittins", Sharing: &sim.SharingSummary{On: on, UsefulUtil: useful,
			WorkGPUHours: work, Guaranteed: sim.ClassSummary{Jobs: 8, AvgJCT: jct}}}
	}
	return []*sim.Result{
		{Label: "fifo", Policy: "fifo"},
		mk("gittins/sharing-off", false, 100, 0.5, 40),
		mk("gittins/sharing-on", true, 103, 0.55, 42),
	}
}

func TestSharingRatiosPairEachOnRunWithTheOffRunBeforeIt(t *testing.T) {
	rs := SharingRatios(sharingResults())
	if len(rs) != 1 {
		t.Fatalf("%d ratios, want 1", len(rs))
	}
	r := rs[0]
	if r.GuaranteedJCT != 1.03 || r.UsefulUtil < 1.0999 || r.UsefulUtil > 1.1001 || r.Work != 1.05 {
		t.Errorf("ratios %+v, want JCT 1.03, useful 1.1, work 1.05", r)
	}
}

func TestSharingTableAndJSONListOnlyRunsWithSharing(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSharingTable(&b, sharingResults()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || strings.Contains(b.String(), " fifo ") {
		t.Errorf("table:\n%s\nwant a header and the two sharing runs", b.String())
	}
	b.Reset()
	if err := WriteJSON(&b, sharingResults(), 1); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Sharing []struct {
			Label      string `json:"label"`
			On         bool   `json:"on"`
			Guaranteed struct {
				AvgJCT float64 `json:"avg_jct_s"`
			} `json:"guaranteed"`
		} `json:"sharing"`
	}
	if err := json.Unmarshal(b.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Sharing) != 2 || rep.Sharing[1].Label != "gittins/sharing-on" || !rep.Sharing[1].On || rep.Sharing[1].Guaranteed.AvgJCT != 103 {
		t.Errorf("JSON sharing rows: %+v", rep.Sharing)
	}
}
