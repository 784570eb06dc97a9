package report

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/lachesis-sched/lachesis/internal/chart"
	"github.com/lachesis-sched/lachesis/sim"
)

// Output file names in a results directory.
const (
	FileSummaryCSV  = "summary.csv"
	FileSummaryJSON = "summary.json"
	FileSummaryMD   = "summary.md"
	FileCDF         = "jct_cdf.png"
	FileJobsCSV     = "jobs.csv"
)

// WriteOutputs writes a comparison's files into dir: the summary as CSV,
// JSON and Markdown (with the Ratios), the JCT CDF plot (one per
// allocation mode, jct_cdf_MODE.png, when there are several), and every
// job when withJobs is set.
// It returns the paths written.
func WriteOutputs(dir string, results []*sim.Result, seed uint64, title string, withJobs bool) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	write := func(name string, fill func(io.Writer) error) error {
		path := filepath.Join(dir, name)
		if err := writeFile(path, fill); err != nil {
			return err
		}
		written = append(written, path)
		return nil
	}
	err := errors.Join(
		write(FileSummaryCSV, func(f io.Writer) error { return WriteSummaryCSV(f, results) }),
		write(FileSummaryJSON, func(f io.Writer) error { return WriteJSON(f, results, seed) }),
		write(FileSummaryMD, func(f io.Writer) error {
			if err := WriteMarkdown(f, results); err != nil {
				return err
			}
			if len(Ratios(results)) == 0 {
				return nil
			}
			fmt.Fprintln(f)
			return WriteRatiosMarkdown(f, results)
		}),
	)
	// One chart per allocation mode: a dozen lines on one chart cannot be
	// told apart.
	for _, group := range byAlloc(results) {
		name, t := FileCDF, title
		if len(byAlloc(results)) > 1 {
			alloc := string(group[0].Alloc)
			name = strings.TrimSuffix(FileCDF, ".png") + "_" + alloc + ".png"
			t = title + ", " + alloc
		}
		err = errors.Join(err, write(name, func(f io.Writer) error { return CDFChart(group, t).WritePNG(f) }))
	}
	if err == nil && withJobs {
		err = write(FileJobsCSV, func(f io.Writer) error { return WriteJobsCSV(f, results) })
	}
	return written, err
}

// byAlloc splits results by allocation mode, keeping their order.
func byAlloc(results []*sim.Result) [][]*sim.Result {
	var groups [][]*sim.Result
	index := map[sim.AllocMode]int{}
	for _, r := range results {
		i, ok := index[r.Alloc]
		if !ok {
			i = len(groups)
			index[r.Alloc] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	return groups
}

// CDFChart is the JCT CDF of each result, one line per policy.
func CDFChart(results []*sim.Result, title string) chart.CDF {
	c := chart.CDF{Title: title, XLabel: "job completion time (log scale)"}
	labels := summaries(results)
	for i, r := range results {
		jcts := make([]float64, len(r.Jobs))
		for k, j := range r.Jobs {
			jcts[k] = j.JCT
		}
		c.Series = append(c.Series, chart.Series{Label: labels[i].Label, Values: jcts})
	}
	return c
}

// Sweep output file names.
const (
	FileSweepCSV = "sweep.csv"
	FileSweepMD  = "sweep.md"
)

// WriteSweepOutputs writes a sweep as CSV and as Markdown, the latter ending
// with the chosen default, into dir. It returns the paths written.
func WriteSweepOutputs(dir string, settings []sim.SweepSetting, rows []sim.SweepRow) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, out := range []struct {
		name string
		fill func(io.Writer) error
	}{
		{FileSweepCSV, func(f io.Writer) error { return WriteSweepCSV(f, settings, rows) }},
		{FileSweepMD, func(f io.Writer) error {
			if err := WriteSweepMarkdown(f, settings, rows); err != nil {
				return err
			}
			best, _ := sim.Chosen(rows)
			_, err := fmt.Fprintf(f, "\nChosen: %s (regret %.3f, %d preemptions).\n", best.Point, best.Regret, best.Preemptions())
			return err
		}},
	} {
		path := filepath.Join(dir, out.name)
		if err := writeFile(path, out.fill); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}

// writeFile creates path and fills it; a failure to fill or close it
// names the path.
func writeFile(path string, fill func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = fill(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
