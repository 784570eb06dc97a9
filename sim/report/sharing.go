package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/lachesis-sched/lachesis/sim"
)

// WriteSharingTable prints the sharing report of the runs that have one
// (sim.SharingSummary): utilisation and throughput in the window of
// submissions, each class's JCT and time to first start, and the
// opportunistic jobs' requeues by cause. Runs without it are left out.
func WriteSharingTable(w io.Writer, results []*sim.Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tGPU alloc\tuseful\twork/h\tguar. jobs\tavg JCT\tfirst start\topp. jobs\tavg JCT\tfirst start\tdone in window\tevicted\treverted\twith host\tmoved\tpromoted\tpairs\t")
	for _, r := range results {
		s := r.Sharing
		if s == nil {
			continue
		}
		g, o := s.Guaranteed, s.Opportunistic
		fmt.Fprintf(tw, "%s\t%.1f%%\t%.1f%%\t%.1f\t%d\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", r.Label,
			100*s.AllocUtil, 100*s.UsefulUtil, s.WorkPerHour, g.Jobs, HumanDuration(g.AvgJCT), HumanDuration(g.AvgFirstStart),
			o.Jobs, HumanDuration(o.AvgJCT), HumanDuration(o.AvgFirstStart), o.FinishedInWindow,
			s.Evicted, s.Reverted, s.HostPreempted, s.Moved, s.Promoted, s.Pairs)
	}
	return tw.Flush()
}

// SharingRatio is one on/off comparison of a policy's runs.
type SharingRatio struct {
	Policy string
	// GuaranteedJCT, UsefulUtil and Work are on over off.
	GuaranteedJCT, UsefulUtil, Work float64
}

// SharingRatios pairs each run with sharing on with the run before it
// with sharing off (SharingVariants' order).
func SharingRatios(results []*sim.Result) []SharingRatio {
	var out []SharingRatio
	for i := 1; i < len(results); i++ {
		off, on := results[i-1].Sharing, results[i].Sharing
		if off == nil || on == nil || off.On || !on.On {
			continue
		}
		out = append(out, SharingRatio{Policy: results[i].Policy,
			GuaranteedJCT: on.Guaranteed.AvgJCT / off.Guaranteed.AvgJCT,
			UsefulUtil:    on.UsefulUtil / off.UsefulUtil,
			Work:          on.WorkGPUHours / off.WorkGPUHours})
	}
	return out
}
