package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/lachesis-sched/lachesis/sim"
)

// summaries returns each result's summary with its label filled in.
func summaries(results []*sim.Result) []sim.Summary {
	out := make([]sim.Summary, len(results))
	for i, r := range results {
		out[i] = r.Summary
		out[i].Label = r.Label
		if out[i].Label == "" {
			out[i].Label = r.Policy
		}
	}
	return out
}

// WriteTable prints the comparison table for people: JCTs as durations,
// utilisation as a percentage.
func WriteTable(w io.Writer, results []*sim.Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tjobs\tavg JCT\tmedian JCT\tp95 JCT\tp99 JCT\tmakespan\tGPU util\tpreemptions\tper job\tp50\tp99\tspeed\t")
	for _, s := range summaries(results) {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%.1f%%\t%d\t%.2f\t%.0f\t%.0f\t%.2f\t\n", s.Label, s.Jobs,
			HumanDuration(s.AvgJCT), HumanDuration(s.MedianJCT), HumanDuration(s.P95JCT),
			HumanDuration(s.P99JCT), HumanDuration(s.Makespan), 100*s.GPUUtil, s.Preemptions,
			s.PreemptionsPerJob, s.PreemptionsP50, s.PreemptionsP99, s.AvgSpeed)
	}
	return tw.Flush()
}

// WriteMarkdown prints the same table as Markdown, times in seconds with one
// decimal (enough to compare with the reference simulator's figures).
func WriteMarkdown(w io.Writer, results []*sim.Result) error {
	fmt.Fprintln(w, "| policy | jobs | avg JCT (s) | median JCT (s) | p95 JCT (s) | p99 JCT (s) | makespan (s) | GPU util | preemptions | per job | p50 per job | p99 per job | avg speed |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range summaries(results) {
		_, err := fmt.Fprintf(w, "| %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f%% | %d | %.2f | %.0f | %.0f | %.2f |\n", s.Label, s.Jobs,
			s.AvgJCT, s.MedianJCT, s.P95JCT, s.P99JCT, s.Makespan, 100*s.GPUUtil, s.Preemptions,
			s.PreemptionsPerJob, s.PreemptionsP50, s.PreemptionsP99, s.AvgSpeed)
		if err != nil {
			return err
		}
	}
	return nil
}

// WriteSummaryCSV writes one row per result, times in seconds.
func WriteSummaryCSV(w io.Writer, results []*sim.Result) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"label", "policy", "alloc", "jobs", "avg_jct_s", "median_jct_s", "p95_jct_s",
		"p99_jct_s", "makespan_s", "gpu_util", "preemptions", "preemptions_per_job", "preemptions_p50",
		"preemptions_p99", "promotions", "avg_speed"})
	for _, s := range summaries(results) {
		cw.Write([]string{s.Label, s.Policy, string(s.Alloc), strconv.Itoa(s.Jobs), ff(s.AvgJCT), ff(s.MedianJCT),
			ff(s.P95JCT), ff(s.P99JCT), ff(s.Makespan), ff(s.GPUUtil), strconv.Itoa(s.Preemptions),
			ff(s.PreemptionsPerJob), ff(s.PreemptionsP50), ff(s.PreemptionsP99),
			strconv.Itoa(s.Promotions), ff(s.AvgSpeed)})
	}
	cw.Flush()
	return cw.Error()
}

// Report is the JSON document of a comparison.
type Report struct {
	Trace          string        `json:"trace"`
	Jobs           int           `json:"jobs"`
	Cluster        string        `json:"cluster"`
	GPUs           int           `json:"gpus"`
	RestartPenalty float64       `json:"restart_penalty_s"`
	PassInterval   float64       `json:"pass_interval_s"`
	Seed           uint64        `json:"seed"`
	Results        []sim.Summary `json:"results"`
	Ratios         []Ratio       `json:"ratios,omitempty"`
	// Sharing is the sharing report of runs with -sharing, in run order.
	Sharing []SharingRow `json:"sharing,omitempty"`
}

// SharingRow is one run's sharing report.
type SharingRow struct {
	Label string `json:"label"`
	*sim.SharingSummary
}

// WriteJSON writes the comparison as a Report.
func WriteJSON(w io.Writer, results []*sim.Result, seed uint64) error {
	rep := Report{Seed: seed, Results: summaries(results), Ratios: Ratios(results)}
	labels := summaries(results)
	for i, r := range results {
		if r.Sharing != nil {
			rep.Sharing = append(rep.Sharing, SharingRow{Label: labels[i].Label, SharingSummary: r.Sharing})
		}
	}
	if len(results) > 0 {
		r := results[0]
		rep.Trace, rep.Jobs, rep.Cluster, rep.GPUs = r.Trace, len(r.Jobs), r.Shape.String(), r.Shape.GPUs()
		rep.RestartPenalty, rep.PassInterval = r.RestartPenalty, r.PassInterval
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteJobsCSV writes every job of every result, for plots or checks of
// one's own.
func WriteJobsCSV(w io.Writer, results []*sim.Result) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"label", "job_id", "gpus", "model", "submit_s", "duration_s", "first_start_s",
		"finish_s", "jct_s", "preemptions", "speed"})
	labels := summaries(results)
	for i, r := range results {
		label := labels[i].Label
		for _, j := range r.Jobs {
			cw.Write([]string{label, strconv.FormatUint(uint64(j.ID), 10), strconv.Itoa(j.GPUs), j.Model,
				ff(j.Submit), ff(j.Duration), ff(j.FirstStart), ff(j.Finish), ff(j.JCT),
				strconv.Itoa(j.Preemptions), ff(j.Speed)})
		}
	}
	cw.Flush()
	return cw.Error()
}

func ff(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// HumanDuration prints seconds the way people read queue times: "3m20s",
// "5h02m", "2d04h".
func HumanDuration(sec float64) string {
	d := time.Duration(sec * float64(time.Second))
	switch {
	case sec < 60:
		return fmt.Sprintf("%.1fs", sec)
	case sec < 3600:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case sec < 86400:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}
