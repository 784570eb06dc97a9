package report

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/lachesis-sched/lachesis/sim"
)

// WriteSynergyReplayMarkdown writes a synergy replay's rows as a Markdown
// table on shape, with each list's proportional/Synergy and
// proportional/start-time ratios.
func WriteSynergyReplayMarkdown(w io.Writer, shape sim.Shape, rows []sim.SynergyReplayRow) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "Synergy-style job lists on %s; average JCT of jobs %d–%d\n\n",
		shape, sim.SynergyWindow.From, sim.SynergyWindow.To-1)
	fmt.Fprintln(bw, "| jobs/h | seed | jobs simulated | offered load | policy | reserve | proportional avg JCT (h) | Synergy avg JCT (h) | proportional / Synergy | avg speed (Synergy) | start-time avg JCT (h) | proportional / start-time | avg speed (start-time) |")
	fmt.Fprintln(bw, "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(bw, "| %g | %d | %d | %.2f | %s | %g | %.1f | %.1f | **%.2f** | %.2f | %.1f | **%.2f** | %.2f |\n",
			r.Rate, r.Seed, r.Jobs, r.Load, r.Policy, r.Reserve, r.ProportionalJCT/3600, r.SynergyJCT/3600,
			r.ProportionalJCT/r.SynergyJCT, r.SynergySpeed, r.StartJCT/3600, r.ProportionalJCT/r.StartJCT, r.StartSpeed)
	}
	return bw.Flush()
}

// WriteSynergyReplayCSV writes a synergy replay's rows as CSV (JCTs in
// seconds).
func WriteSynergyReplayCSV(w io.Writer, rows []sim.SynergyReplayRow) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "jobs_per_hour,seed,jobs_simulated,offered_load,window_jobs,policy,reserve,proportional_avg_jct_s,synergy_avg_jct_s,ratio,synergy_avg_speed,start_avg_jct_s,start_ratio,start_avg_speed")
	for _, r := range rows {
		fmt.Fprintf(bw, "%g,%d,%d,%.4f,%d,%s,%g,%.1f,%.1f,%.4f,%.4f,%.1f,%.4f,%.4f\n",
			r.Rate, r.Seed, r.Jobs, r.Load, r.WindowJobs, r.Policy, r.Reserve, r.ProportionalJCT, r.SynergyJCT,
			r.ProportionalJCT/r.SynergyJCT, r.SynergySpeed, r.StartJCT, r.ProportionalJCT/r.StartJCT, r.StartSpeed)
	}
	return bw.Flush()
}

// WriteSynergyReplayOutputs writes summary.md and summary.csv of a
// synergy replay into dir and returns their paths.
func WriteSynergyReplayOutputs(dir string, shape sim.Shape, rows []sim.SynergyReplayRow) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, out := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{FileSummaryMD, func(w io.Writer) error { return WriteSynergyReplayMarkdown(w, shape, rows) }},
		{FileSummaryCSV, func(w io.Writer) error { return WriteSynergyReplayCSV(w, rows) }},
	} {
		path := filepath.Join(dir, out.name)
		if err := writeFile(path, out.write); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}
