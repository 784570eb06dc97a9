package sim

import (
	"cmp"
	"slices"
)

// AccountSummary is one account's (virtual cluster's) part of a run.
type AccountSummary struct {
	Account string `json:"account"`
	Jobs    int    `json:"jobs"`
	// GPUSeconds is the GPU time its jobs held (restart penalties
	// included); GPUShare that over all accounts'. Every job runs to the
	// end, so this is the account's demand whatever the policy.
	GPUSeconds float64 `json:"gpu_s"`
	GPUShare   float64 `json:"gpu_share"`
	// ContendedShare is its share of the GPU time held while some job
	// waited: when the scheduler had to choose, what the account got.
	// This is what fair share moves.
	ContendedShare float64 `json:"contended_gpu_share"`
	AvgJCT         float64 `json:"avg_jct_s"`
}

// accountMeter numbers a run's accounts and integrates each one's running
// GPUs over the time jobs were waiting. Accounts are few (Philly has 15
// virtual clusters), so advancing it at every event is cheap.
type accountMeter struct {
	ids       map[string]int32
	names     []string
	gpus      []int     // GPUs each account's running jobs hold now
	contended []float64 // GPU-seconds held while some job waited
	last      float64   // time up to which contended is integrated
}

func (m *accountMeter) index(name string) int32 {
	if m.ids == nil {
		m.ids = make(map[string]int32)
	}
	id, ok := m.ids[name]
	if !ok {
		id = int32(len(m.names))
		m.ids[name] = id
		m.names = append(m.names, name)
		m.gpus = append(m.gpus, 0)
		m.contended = append(m.contended, 0)
	}
	return id
}

// advance integrates up to t; waiting says jobs waited since the last call.
func (m *accountMeter) advance(t float64, waiting bool) {
	if dt := t - m.last; waiting && dt > 0 {
		for a, g := range m.gpus {
			m.contended[a] += float64(g) * dt
		}
	}
	m.last = max(m.last, t)
}

// summaries is one AccountSummary per account, most GPU time first.
func (m *accountMeter) summaries(jobs []JobResult) []AccountSummary {
	out := make([]AccountSummary, len(m.names))
	var total, contended float64
	for a, name := range m.names {
		out[a].Account = name
		contended += m.contended[a]
	}
	for _, j := range jobs {
		s := &out[m.ids[j.Account]]
		s.Jobs++
		s.GPUSeconds += j.GPUSeconds
		s.AvgJCT += j.JCT
		total += j.GPUSeconds
	}
	for a := range out {
		s := &out[a]
		if s.Jobs > 0 {
			s.AvgJCT /= float64(s.Jobs)
		}
		if total > 0 {
			s.GPUShare = s.GPUSeconds / total
		}
		if contended > 0 {
			s.ContendedShare = m.contended[a] / contended
		}
	}
	slices.SortStableFunc(out, func(a, b AccountSummary) int {
		if c := cmp.Compare(b.GPUSeconds, a.GPUSeconds); c != 0 {
			return c
		}
		return cmp.Compare(a.Account, b.Account)
	})
	return out
}
