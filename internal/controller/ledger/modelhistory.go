package ledger

import (
	"cmp"
	"slices"
	"strings"
)

// ModelHistory is one user's history of one model folded the way the
// shard rewrite at submit judges it (config.ShardConvert.JudgeHistory):
// how many finished jobs it holds, the highest of their peak
// utilisations, the most GPU memory any of them held, and when the newest
// ended.
type ModelHistory struct {
	User  uint32
	Model string
	// Jobs is how many measured jobs the history holds.
	Jobs int
	// UtilPeak is the highest of their peak utilisations, percent.
	UtilPeak float64
	// MemPeakMB is the most GPU memory any of them held.
	MemPeakMB float64
	// LastFinished is the newest job's end, Unix seconds.
	LastFinished int64
}

// Add folds one job of the history in.
func (h *ModelHistory) Add(r ModelJobUse) {
	h.Jobs++
	h.UtilPeak = max(h.UtilPeak, r.UtilPeak)
	h.MemPeakMB = max(h.MemPeakMB, r.MemPeakMB)
	h.LastFinished = max(h.LastFinished, r.Finished)
}

// ModelHistories folds rows (model_job_use, bounded by MaxModelJobUseRows
// and MaxModelJobUsePerKey) into one history per user and model, the one
// with the most recent job first (then by uid, then by model).
func ModelHistories(rows []ModelJobUse) []ModelHistory {
	type key struct {
		uid   uint32
		model string
	}
	at := map[key]int{}
	var out []ModelHistory
	for _, r := range rows {
		k := key{r.User, r.Model}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, ModelHistory{User: r.User, Model: r.Model})
		}
		out[i].Add(r)
	}
	slices.SortStableFunc(out, func(a, b ModelHistory) int {
		return cmp.Or(cmp.Compare(b.LastFinished, a.LastFinished), cmp.Compare(a.User, b.User), strings.Compare(a.Model, b.Model))
	})
	return out
}
