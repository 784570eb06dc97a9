package report

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lachesis-sched/lachesis/sim"
)

// HeteroRatios are the heterogeneous comparisons among results of one
// trace and Tiresias policy: type-agnostic over effective-throughput
// average JCT with consolidation on and off, and consolidation off over on
// for each placement policy. Above 1 means the denominator is faster.
func HeteroRatios(results []*sim.Result) []Ratio {
	find := func(policy string, p sim.HeteroPolicy, cons bool) (*sim.Result, bool) {
		for _, r := range results {
			if r.Policy == policy && r.Hetero != nil && r.Hetero.Policy == p && r.Hetero.Consolidate == cons {
				return r, true
			}
		}
		return nil, false
	}
	var out []Ratio
	add := func(name string, num, den *sim.Result, ok bool) {
		if ok && den.Summary.AvgJCT > 0 {
			out = append(out, Ratio{Name: name, Numerator: num.Label, Denominator: den.Label,
				Value: num.Summary.AvgJCT / den.Summary.AvgJCT})
		}
	}
	var policies []string
	for _, r := range results {
		if r.Hetero != nil && !slices.Contains(policies, r.Policy) {
			policies = append(policies, r.Policy)
		}
	}
	onOff := map[bool]string{true: "on", false: "off"}
	for _, pol := range policies {
		for _, cons := range []bool{true, false} {
			a, ok1 := find(pol, sim.HeteroAgnostic, cons)
			b, ok2 := find(pol, sim.HeteroEffective, cons)
			add(fmt.Sprintf("%s: type-agnostic / effective-throughput (consolidation %s)", pol, onOff[cons]), a, b, ok1 && ok2)
		}
		for _, hp := range []sim.HeteroPolicy{sim.HeteroAgnostic, sim.HeteroEffective} {
			a, ok1 := find(pol, hp, false)
			b, ok2 := find(pol, hp, true)
			add(fmt.Sprintf("%s: consolidation off / on (%s)", pol, hp), a, b, ok1 && ok2)
		}
		a, ok1 := find(pol, sim.HeteroAgnostic, false)
		b, ok2 := find(pol, sim.HeteroEffective, true)
		add(fmt.Sprintf("%s: agnostic, consolidation off / effective, consolidation on", pol), a, b, ok1 && ok2)
	}
	return out
}

// WriteHeteroMarkdown prints the heterogeneous table (average and p99
// JCT, utilisation per GPU type, spread starts, preemptions) and
// HeteroRatios; nothing when no result is heterogeneous.
func WriteHeteroMarkdown(w io.Writer, results []*sim.Result) error {
	var types []string
	for _, r := range results {
		if r.Hetero != nil {
			types = r.Hetero.Types
			break
		}
	}
	if types == nil {
		return nil
	}
	fmt.Fprint(w, "| run | jobs | avg JCT | p99 JCT | avg JCT (s) | p99 JCT (s) |")
	for _, t := range types {
		fmt.Fprintf(w, " util %s |", t)
	}
	fmt.Fprintln(w, " spread starts | preemptions | avg speed |")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|%s---:|---:|---:|\n", strings.Repeat("---:|", len(types)))
	for _, s := range summaries(results) {
		var h *sim.HeteroSummary
		for _, r := range results {
			if r.Label == s.Label || (r.Label == "" && r.Policy == s.Label) {
				h = r.Hetero
			}
		}
		if h == nil {
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %.0f | %.0f |", s.Label, s.Jobs, HumanDuration(s.AvgJCT),
			HumanDuration(s.P99JCT), s.AvgJCT, s.P99JCT)
		for _, u := range h.Util {
			fmt.Fprintf(w, " %.1f%% |", 100*u)
		}
		if _, err := fmt.Fprintf(w, " %d | %d | %.2f |\n", h.SpreadStarts, s.Preemptions, s.AvgSpeed); err != nil {
			return err
		}
	}
	rs := HeteroRatios(results)
	if len(rs) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| ratio of average JCT | value |")
	fmt.Fprintln(w, "|---|---:|")
	for _, r := range rs {
		if _, err := fmt.Fprintf(w, "| %s | %.2f× |\n", r.Name, r.Value); err != nil {
			return err
		}
	}
	return nil
}

// WriteHeteroOutputs writes hetero.md into dir (already made by
// WriteOutputs) and returns its path.
func WriteHeteroOutputs(dir string, results []*sim.Result) (string, error) {
	path := filepath.Join(dir, sim.FileHeteroMD)
	return path, writeFile(path, func(w io.Writer) error { return WriteHeteroMarkdown(w, results) })
}
