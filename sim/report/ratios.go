package report

import (
	"fmt"
	"io"

	"github.com/lachesis-sched/lachesis/sim"
)

// Ratio is one policy's average JCT over another's on the same trace.
type Ratio struct {
	Name        string  `json:"name"`
	Numerator   string  `json:"numerator"`
	Denominator string  `json:"denominator"`
	Value       float64 `json:"value"`
}

// Ratios are the headline comparisons among results of one trace: 2D-LAS
// over FIFO and 2D-Gittins over the SRTF oracle under each allocation
// mode, and Synergy over proportional allocation for each policy run with
// both. A ratio below 1 means the numerator's average JCT is lower.
func Ratios(results []*sim.Result) []Ratio {
	labels := summaries(results)
	find := func(policy string, alloc sim.AllocMode) (sim.Summary, bool) {
		for _, s := range labels {
			if s.Policy == policy && s.Alloc == alloc {
				return s, true
			}
		}
		return sim.Summary{}, false
	}
	var out []Ratio
	add := func(name string, num, den sim.Summary) {
		if den.AvgJCT > 0 {
			out = append(out, Ratio{Name: name, Numerator: num.Label, Denominator: den.Label, Value: num.AvgJCT / den.AvgJCT})
		}
	}
	for _, alloc := range []sim.AllocMode{sim.AllocProportional, sim.AllocSynergy} {
		pairs := [][3]string{{sim.PolicyLAS, sim.PolicyFIFO, "2D-LAS / FIFO"}, {sim.PolicyGittins, sim.PolicySRTF, "2D-Gittins / SRTF oracle"}}
		for _, p := range pairs {
			num, ok1 := find(p[0], alloc)
			den, ok2 := find(p[1], alloc)
			if ok1 && ok2 {
				add(fmt.Sprintf("%s (%s)", p[2], alloc), num, den)
			}
		}
	}
	for _, policy := range sim.PolicyNames {
		num, ok1 := find(policy, sim.AllocSynergy)
		den, ok2 := find(policy, sim.AllocProportional)
		if ok1 && ok2 {
			add(fmt.Sprintf("Synergy / proportional (%s)", policy), num, den)
		}
	}
	return out
}

// WriteRatiosMarkdown prints Ratios as a Markdown table; nothing when there
// are none.
func WriteRatiosMarkdown(w io.Writer, results []*sim.Result) error {
	rs := Ratios(results)
	if len(rs) == 0 {
		return nil
	}
	fmt.Fprintln(w, "| ratio of average JCT | value |")
	fmt.Fprintln(w, "|---|---:|")
	for _, r := range rs {
		if _, err := fmt.Fprintf(w, "| %s | %.3f |\n", r.Name, r.Value); err != nil {
			return err
		}
	}
	return nil
}
