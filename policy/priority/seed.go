package priority

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
)

// seedCSV is the bundled GPU-time history (see seed_NOTICE.md) that stands in
// for a cluster's own until it has completed enough jobs.
//
//go:embed seed_gputime.csv
var seedCSV string

// seedDistribution is parsed once, at package initialisation; seedErr is
// checked by a test, so a broken embedded file fails the build's tests
// rather than panicking inside slurmctld.
var seedDistribution, seedErr = parseDistributionCSV(seedCSV)

// SeedDistribution returns the distribution built from the bundled seed
// history. The same read-only value is returned on every call.
func SeedDistribution() *Distribution { return seedDistribution }

// parseDistributionCSV reads a one-column CSV: a header line, then one
// number per line. Blank lines are ignored; anything else that is not a
// number is an error, since a silently shortened history would skew the
// index.
func parseDistributionCSV(text string) (*Distribution, error) {
	lines := strings.Split(text, "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "duration" {
		return nil, fmt.Errorf("priority: seed csv: want header %q", "duration")
	}
	samples := make([]float64, 0, len(lines)-1)
	for n, line := range lines[1:] {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		v, err := strconv.ParseFloat(line, 64)
		if err != nil {
			return nil, fmt.Errorf("priority: seed csv line %d: %w", n+2, err)
		}
		samples = append(samples, v)
	}
	return NewDistribution(samples)
}
