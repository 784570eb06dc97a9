package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/lachesis-sched/lachesis/policy/sharing"
	"github.com/lachesis-sched/lachesis/sim"
	"github.com/lachesis-sched/lachesis/sim/report"
	"github.com/lachesis-sched/lachesis/sim/trace"
)

// shareOptions are the flags of GPU sharing runs (-sharing off,on).
type shareOptions struct {
	modes, pairs, gpu, promoteAfter string
	gpuMix, moveAfter               string
	maxSlowdown, opportunistic      float64
	learn, strict                   bool
}

func (s *shareOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&s.modes, "sharing", "", "GPU sharing between guaranteed and opportunistic jobs: off, on, multi (on, with multi-GPU jobs also guests on shares of several GPUs of a node: Slurm 23.11+), or a list such as off,on (each run every way); empty: none, as before sharing existed")
	fs.StringVar(&s.pairs, "pairs", "data/gavel/colocated.csv", "with -sharing: Gavel's co-located throughputs, the pair table's seed (solo throughputs from -gavel)")
	fs.StringVar(&s.gpu, "pairs-gpu", "v100", "with -sharing: the GPU type whose pair figures are used (k80, p100, v100)")
	fs.Float64Var(&s.maxSlowdown, "max-slowdown", sharing.DefaultConfig().MaxSlowdown, "with -sharing: largest loss of a guaranteed job's solo rate its opportunistic neighbour may cause")
	fs.StringVar(&s.promoteAfter, "promote-after", "4h", "with -sharing: waiting after which an opportunistic job is promoted to guaranteed")
	fs.Float64Var(&s.opportunistic, "opportunistic", 0, "with -sharing: mark this share of the jobs opportunistic by a seeded draw on their ids (for traces without a class column)")
	fs.StringVar(&s.gpuMix, "gpu-mix", "", "with -sharing: redraw every job's GPU request from a published mix, keeping arrivals and durations: pai2020 (Alibaba PAI's tasks, trace.PAIRequestMix)")
	fs.StringVar(&s.moveAfter, "move-after", "10m", "with -sharing: a guest that has shared this long is requeued to run alone when a GPU stays idle (0: never)")
	fs.BoolVar(&s.strict, "strict-opportunistic", false, "with -sharing: the first opportunistic rule (sharing.Config.StrictOpportunistic): behind every guaranteed job, evicted by any, upgraded only when none waits")
	fs.BoolVar(&s.learn, "sharing-learn", false, "with -sharing: the scheduler starts with an empty pair table and measures every pair it tries")
}

// variants turns each variant into its sharing runs; without -sharing it
// returns them unchanged.
func (s *shareOptions) variants(variants []sim.Variant, soloPath string, tr *sim.Trace, seed uint64) ([]sim.Variant, error) {
	if s.modes == "" {
		return variants, nil
	}
	rules := sharing.DefaultConfig()
	rules.MaxSlowdown = s.maxSlowdown
	rules.StrictOpportunistic = s.strict
	var err error
	if rules.PromoteAfter, err = parseSeconds(s.promoteAfter); err != nil {
		return nil, fmt.Errorf("-promote-after: %w", err)
	}
	if rules.MoveAfter, err = parseSeconds(s.moveAfter); err != nil {
		return nil, fmt.Errorf("-move-after: %w", err)
	}
	if err := rules.Validate(); err != nil {
		return nil, err
	}
	solo, err := os.Open(soloPath)
	if err != nil {
		return nil, err
	}
	defer solo.Close()
	col, err := os.Open(s.pairs)
	if err != nil {
		return nil, err
	}
	defer col.Close()
	table, err := sharing.ReadGavel(solo, col, s.gpu, sharing.DefaultLimits())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.pairs, err)
	}
	switch s.gpuMix {
	case "":
	case "pai2020":
		trace.ApplyPAIRequestMix(tr, seed)
		fmt.Printf("sharing: GPU requests redrawn from Alibaba PAI 2020's mix (seed %d): %.0f GPU-hours at whole GPUs\n", seed, tr.GPUSeconds()/3600)
	default:
		return nil, fmt.Errorf("-gpu-mix: %q is not pai2020", s.gpuMix)
	}
	if s.opportunistic > 0 {
		n := sim.MarkOpportunistic(tr, s.opportunistic, seed)
		fmt.Printf("sharing: %d of %d jobs marked opportunistic (share %.2f, seed %d)\n", n, len(tr.Jobs), s.opportunistic, seed)
	}
	return sim.SharingVariants(variants, sim.SharingConfig{Rules: rules, Pairs: table, Learn: s.learn}, splitList(s.modes))
}

func writeSharing(results []*sim.Result) error {
	if len(results) == 0 || results[0].Sharing == nil {
		return nil
	}
	fmt.Println("\nsharing: in the window of submissions, GPU time allocated and spent on useful work, work done per hour (GPU-hours), each class's JCT and time to first start, opportunistic requeues by cause (guests moved to an idle GPU among them)")
	if err := report.WriteSharingTable(os.Stdout, results); err != nil {
		return err
	}
	for _, r := range report.SharingRatios(results) {
		fmt.Printf("%s sharing on/off: guaranteed avg JCT %.3f, useful utilisation %.3f, work done %.3f\n", r.Policy, r.GuaranteedJCT, r.UsefulUtil, r.Work)
	}
	return nil
}
