package trace

import "math/rand/v2"

// PAIRequestBucket is one bucket of the GPU requests of Alibaba PAI's
// tasks: the share of tasks whose request (plan_gpu, in % of one GPU) is
// in [Low, High) (for the one-GPU bucket, exactly 100; for the last, above
// 100).
type PAIRequestBucket struct {
	Low, High float64
	Share     float64
}

// PAIRequestMix is the distribution of GPU requests per task in the
// Alibaba PAI trace of July–August 2020 (cluster-trace-gpu-v2020, the
// trace of Weng et al., "MLaaS in the Wild", NSDI'22), from the figure
// "Proportion of Tasks" by GPU request that Alibaba's own analysis notebook
// of the trace plots (alibaba/clusterdata,
// cluster-trace-gpu-v2020/analysis/analysis.ipynb, cell 31, published
// with its output). The figure prints no numbers: the shares were measured
// off its bars in pixels (gridlines every 10% are 52.9 px apart; each bar
// end ±1 px, about ±0.2 percentage points) as 14.5, 26.2, 13.0, 42.7 and
// 2.6%, which sum to 99.0% (the bars' black edges); they are scaled here to
// sum to 1.
var PAIRequestMix = []PAIRequestBucket{
	{0, 0.25, 14.5 / 99.0},
	{0.25, 0.5, 26.2 / 99.0},
	{0.5, 1, 13.0 / 99.0},
	{1, 1, 42.7 / 99.0},
	{1, 0, 2.6 / 99.0},
}

// ApplyPAIRequestMix replaces each job's GPU request by a draw from
// PAIRequestMix, keeping its arrival and duration: a fractional bucket
// gives a share drawn uniformly in the bucket (the figure has no finer
// split; at least 0.01), the one-GPU bucket 1 GPU, and the last bucket the
// job's own count where it asked for more than one GPU, else 2. The draws
// come from a PCG seeded with seed, one job after the other in trace
// order, so a seed gives one list.
func ApplyPAIRequestMix(t *Trace, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x7061693230)) // "pai20"
	for i := range t.Jobs {
		j := &t.Jobs[i]
		x := rng.Float64()
		k := 0
		for k < len(PAIRequestMix)-1 && x >= PAIRequestMix[k].Share {
			x -= PAIRequestMix[k].Share
			k++
		}
		b := PAIRequestMix[k]
		u := rng.Float64()
		switch {
		case b.High > b.Low:
			j.GPUs, j.Share = 1, max(0.01, b.Low+u*(b.High-b.Low))
		case b.High == b.Low:
			j.GPUs, j.Share = 1, 0
		case j.GPUs <= 1:
			j.GPUs, j.Share = 2, 0
		default:
			j.Share = 0
		}
	}
}
