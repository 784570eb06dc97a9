package sensitivity

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// SummaryRow is one model's line of a Synergy profile summary.
type SummaryRow struct {
	Model string
	Best  Demand
	// Speedup is the best case's throughput over the proportional share's.
	Speedup float64
	// IterTime is the iteration time at the proportional share (seconds);
	// Batch the batch size it was measured with.
	IterTime float64
	Batch    int
}

// ReadSummaryCSV reads the summary format described in the package
// documentation.
func ReadSummaryCSV(r io.Reader) ([]SummaryRow, error) {
	rows, err := readCSV(r, []string{"model", "best_cpus_per_gpu", "best_mem_gb_per_gpu",
		"speedup_vs_proportional", "iter_time_s", "batch"})
	if err != nil {
		return nil, err
	}
	out := make([]SummaryRow, 0, len(rows))
	for _, row := range rows {
		f := row.fields
		cpus, err1 := strconv.Atoi(strings.TrimSpace(f[1]))
		mem, err2 := parsePositive(f[2])
		speedup, err3 := parsePositive(f[3])
		iter, err4 := parsePositive(f[4])
		batch, err5 := strconv.Atoi(strings.TrimSpace(f[5]))
		for _, err := range []error{err1, err2, err3, err4, err5} {
			if err != nil {
				return nil, fmt.Errorf("%w: summary line %d: %w", ErrBadProfile, row.line, err)
			}
		}
		out = append(out, SummaryRow{
			Model:    strings.TrimSpace(f[0]),
			Best:     Demand{CPUsPerGPU: cpus, MemGBPerGPU: mem},
			Speedup:  speedup,
			IterTime: iter,
			Batch:    batch,
		})
	}
	return out, nil
}
