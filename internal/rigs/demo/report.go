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
// workload order) and the average JCTs; with cpus, the CPUs per GPU each
// job got instead of its requeues.
func Report(w io.Writer, aLabel string, a []Outcome, bLabel string, b []Outcome, cpus bool) {
	col := "requeues"
	if cpus {
		col = "CPUs/GPU"
	}
	extra := func(o Outcome) int {
		if cpus {
			return o.CPUsPerGPU
		}
		return o.Restarts
	}
	fmt.Fprintf(w, "\n%-9s %-9s %4s %6s | %-22s | %-22s\n", "", "", "", "", aLabel, bLabel)
	fmt.Fprintf(w, "%-9s %-9s %4s %6s | %8s %13s | %8s %13s\n", "job", "model", "gpus", "work", "JCT", col, "JCT", col)
	for i := range a {
		model := a[i].Job.Model
		if model == "" {
			model = "-"
		}
		fmt.Fprintf(w, "%-9s %-9s %4s %5.0fs | %7.0fs %13d | %7.0fs %13d\n", a[i].Job.Name, model, gpusColumn(a[i].Job),
			a[i].Job.Work.Seconds(), a[i].JCT().Seconds(), extra(a[i]), b[i].JCT().Seconds(), extra(b[i]))
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
	w.Write([]string{"policy", "job", "model", "gpus", "work_s", "jct_s", "requeues", "cpus_per_gpu"}) //nolint:errcheck
	for _, set := range []struct {
		label string
		out   []Outcome
	}{{aLabel, a}, {bLabel, b}} {
		for _, o := range set.out {
			w.Write([]string{set.label, o.Job.Name, o.Job.Model, strconv.Itoa(o.Job.GPUs), //nolint:errcheck
				strconv.FormatFloat(o.Job.Work.Seconds(), 'f', 0, 64),
				strconv.FormatFloat(o.JCT().Seconds(), 'f', 0, 64), strconv.Itoa(o.Restarts), strconv.Itoa(o.CPUsPerGPU)})
		}
	}
	w.Flush()
	return w.Error()
}

// gpusColumn is a job's GPUs, or the share of one it gets with sharing on
// (the sharing workload's jobs take a whole GPU with it off).
func gpusColumn(j Job) string {
	if j.Share > 0 {
		return strconv.FormatFloat(j.Share, 'g', 3, 64)
	}
	return strconv.Itoa(j.GPUs)
}
