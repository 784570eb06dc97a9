package report

import (
	"fmt"
	"io"
	"slices"

	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/sim"
)

// isReference says whether a point is the reference simulator's
// configuration (las, 3250/7200, no promotion).
func isReference(p sim.SweepPoint) bool {
	return p.Mode == priority.ModeLAS && slices.Equal(p.Thresholds, []float64{3250, 7200}) && p.PromoteKnob == 0
}

// WriteSweepMarkdown prints the sweep as a Markdown table: per setting the
// average JCT (and its ratio to the reference configuration's), p99 JCT
// and preemptions, then the regret.
func WriteSweepMarkdown(w io.Writer, settings []sim.SweepSetting, rows []sim.SweepRow) error {
	ref := make([]float64, len(settings))
	for _, r := range rows {
		if isReference(r.Point) {
			for k, s := range r.Results {
				ref[k] = s.AvgJCT
			}
		}
	}
	head := "| stage | mode | K | thresholds (GPU-s) | promote knob |"
	rule := "|---:|---|---:|---|---:|"
	for _, s := range settings {
		head += fmt.Sprintf(" %s: avg JCT (s) | ÷ reference | p99 (s) | preemptions |", s.Name)
		rule += "---:|---:|---:|---:|"
	}
	fmt.Fprintln(w, head+" regret |")
	fmt.Fprintln(w, rule+"---:|")
	for _, r := range rows {
		line := fmt.Sprintf("| %d | %s | %d | %s | %g |", r.Stage, r.Point.Mode, r.Point.K(),
			sim.FormatThresholds(r.Point.Thresholds), r.Point.PromoteKnob)
		for k, s := range r.Results {
			rel := "—"
			if ref[k] > 0 {
				rel = fmt.Sprintf("%.3f", s.AvgJCT/ref[k])
			}
			line += fmt.Sprintf(" %.0f | %s | %.0f | %d |", s.AvgJCT, rel, s.P99JCT, s.Preemptions)
		}
		if _, err := fmt.Fprintf(w, "%s %.3f |\n", line, r.Regret); err != nil {
			return err
		}
	}
	return nil
}

// WriteSweepCSV writes the sweep, one row per point and setting.
func WriteSweepCSV(w io.Writer, settings []sim.SweepSetting, rows []sim.SweepRow) error {
	if _, err := fmt.Fprintln(w, "stage,mode,k,thresholds,promote_knob,setting,avg_jct_s,median_jct_s,p95_jct_s,p99_jct_s,makespan_s,gpu_util,preemptions,promotions,regret"); err != nil {
		return err
	}
	for _, r := range rows {
		for k, s := range r.Results {
			_, err := fmt.Fprintf(w, "%d,%s,%d,%s,%g,%s,%s,%s,%s,%s,%s,%s,%d,%d,%s\n", r.Stage, r.Point.Mode, r.Point.K(),
				sim.FormatThresholds(r.Point.Thresholds), r.Point.PromoteKnob, settings[k].Name, ff(s.AvgJCT), ff(s.MedianJCT),
				ff(s.P95JCT), ff(s.P99JCT), ff(s.Makespan), ff(s.GPUUtil), s.Preemptions, s.Promotions, ff(r.Regret))
			if err != nil {
				return err
			}
		}
	}
	return nil
}
