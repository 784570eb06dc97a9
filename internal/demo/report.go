package demo

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// Average is the mean JCT of outcomes.
func Average(out []Outcome) time.Duration {
	var sum time.Duration
	for _, o := range out {
		sum += o.JCT()
	}
	return sum / time.Duration(max(len(out), 1))
}

// Report prints the per-job table comparing two scenarios' outcomes (same
// workload order) and the average JCTs.
func Report(w io.Writer, aLabel string, a []Outcome, bLabel string, b []Outcome) {
	fmt.Fprintf(w, "\n%-9s %4s %6s | %-22s | %-22s\n", "", "", "", aLabel, bLabel)
	fmt.Fprintf(w, "%-9s %4s %6s | %8s %13s | %8s %13s\n", "job", "gpus", "work", "JCT", "requeues", "JCT", "requeues")
	for i := range a {
		fmt.Fprintf(w, "%-9s %4d %5.0fs | %7.0fs %13d | %7.0fs %13d\n", a[i].Job.Name, a[i].Job.GPUs,
			a[i].Job.Work.Seconds(), a[i].JCT().Seconds(), a[i].Restarts, b[i].JCT().Seconds(), b[i].Restarts)
	}
	avgA, avgB := Average(a), Average(b)
	fmt.Fprintf(w, "\naverage JCT: %s %.1f s, %s %.1f s", aLabel, avgA.Seconds(), bLabel, avgB.Seconds())
	if avgA > 0 {
		fmt.Fprintf(w, "  =>  %s/%s = %.2f\n", bLabel, aLabel, avgB.Seconds()/avgA.Seconds())
	} else {
		fmt.Fprintln(w)
	}
}

// WriteCSV saves both scenarios' outcomes for plotting or later reading.
func WriteCSV(path, aLabel string, a []Outcome, bLabel string, b []Outcome) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := csv.NewWriter(f)
	w.Write([]string{"policy", "job", "gpus", "work_s", "jct_s", "requeues"}) //nolint:errcheck
	for _, set := range []struct {
		label string
		out   []Outcome
	}{{aLabel, a}, {bLabel, b}} {
		for _, o := range set.out {
			w.Write([]string{set.label, o.Job.Name, strconv.Itoa(o.Job.GPUs), //nolint:errcheck
				strconv.FormatFloat(o.Job.Work.Seconds(), 'f', 0, 64),
				strconv.FormatFloat(o.JCT().Seconds(), 'f', 0, 64), strconv.Itoa(o.Restarts)})
		}
	}
	w.Flush()
	return w.Error()
}
