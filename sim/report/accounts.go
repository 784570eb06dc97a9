package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/lachesis-sched/lachesis/sim"
)

// WriteAccountTable prints one row per account: its jobs and share of all
// GPU time (its demand, the same in every result), then for each result
// its share of the GPU time held while jobs waited and its average JCT.
// Accounts are the first result's, in its order.
func WriteAccountTable(w io.Writer, results []*sim.Result) error {
	if len(results) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "account\tjobs\tGPU time\t")
	labels := summaries(results)
	byName := make([]map[string]sim.AccountSummary, len(results))
	for i, r := range results {
		fmt.Fprintf(tw, "%s contended\t%s avg JCT\t", labels[i].Label, labels[i].Label)
		byName[i] = make(map[string]sim.AccountSummary, len(r.Accounts))
		for _, a := range r.Accounts {
			byName[i][a.Account] = a
		}
	}
	fmt.Fprintln(tw)
	for _, a := range results[0].Accounts {
		name := a.Account
		if name == "" {
			name = "(none)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f%%\t", name, a.Jobs, 100*a.GPUShare)
		for i := range results {
			s := byName[i][a.Account]
			fmt.Fprintf(tw, "%.1f%%\t%s\t", 100*s.ContendedShare, HumanDuration(s.AvgJCT))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
