package sensitivity

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ErrBadProfile is wrapped by every error about a malformed profile or
// summary file.
var ErrBadProfile = errors.New("bad sensitivity profile")

// Profile is one model's normalised throughput on a grid of per-GPU CPU and
// memory allocations.
type Profile struct {
	Model string
	// CPUs and MemGB are the grid's axes, strictly ascending.
	CPUs  []int
	MemGB []float64
	// Throughput[i][j] is the throughput at CPUs[i] and MemGB[j], relative
	// to the GPU-proportional share (1.0).
	Throughput [][]float64
}

// Profiles are the profiles of many models by model name.
type Profiles map[string]*Profile

// Names returns the model names in ascending order, which is the order the
// simulator draws models from, so it must not depend on map iteration.
func (ps Profiles) Names() []string {
	names := make([]string, 0, len(ps))
	for n := range ps {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// gridEpsilon absorbs float noise when an allocation is compared with a
// grid value (62.5 GB computed as 500/8 must hit the 62.5 column).
const gridEpsilon = 1e-9

// At is the throughput at a per-GPU allocation of cpus CPUs and memGB GB.
// Between grid points it steps down to the nearest grid point below in each
// dimension, which never overstates what an allocation buys; below the
// smallest grid value of either axis it is 0, since nothing was measured
// there.
func (p *Profile) At(cpus, memGB float64) float64 {
	i := stepDown(len(p.CPUs), func(k int) float64 { return float64(p.CPUs[k]) }, cpus)
	j := stepDown(len(p.MemGB), func(k int) float64 { return p.MemGB[k] }, memGB)
	if i < 0 || j < 0 {
		return 0
	}
	return p.Throughput[i][j]
}

// stepDown is the index of the largest axis value <= x (with gridEpsilon of
// slack), or -1.
func stepDown(n int, axis func(int) float64, x float64) int {
	idx := -1
	for k := 0; k < n; k++ {
		if axis(k) <= x+gridEpsilon {
			idx = k
		}
	}
	return idx
}

// Max is the highest throughput anywhere in the profile.
func (p *Profile) Max() float64 {
	best := math.Inf(-1)
	for _, row := range p.Throughput {
		for _, v := range row {
			best = max(best, v)
		}
	}
	return best
}

// ReadThroughputCSV reads the throughput-table format described in the
// package documentation.
func ReadThroughputCSV(r io.Reader) (Profiles, error) {
	rows, err := readCSV(r, []string{"model", "cpus_per_gpu", "mem_gb_per_gpu", "norm_throughput"})
	if err != nil {
		return nil, err
	}
	type point struct {
		cpus int
		mem  float64
	}
	points := map[string]map[point]float64{}
	var order []string
	for _, row := range rows {
		model := strings.TrimSpace(row.fields[0])
		if model == "" {
			return nil, fmt.Errorf("%w: line %d: empty model name", ErrBadProfile, row.line)
		}
		cpus, err := strconv.Atoi(strings.TrimSpace(row.fields[1]))
		if err != nil || cpus <= 0 {
			return nil, fmt.Errorf("%w: line %d: cpus_per_gpu %q is not a positive integer", ErrBadProfile, row.line, row.fields[1])
		}
		mem, err := parsePositive(row.fields[2])
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: mem_gb_per_gpu: %w", ErrBadProfile, row.line, err)
		}
		tput, err := strconv.ParseFloat(strings.TrimSpace(row.fields[3]), 64)
		if err != nil || tput < 0 || math.IsNaN(tput) || math.IsInf(tput, 0) {
			return nil, fmt.Errorf("%w: line %d: norm_throughput %q is not a number >= 0", ErrBadProfile, row.line, row.fields[3])
		}
		if points[model] == nil {
			points[model] = map[point]float64{}
			order = append(order, model)
		}
		pt := point{cpus, mem}
		if _, dup := points[model][pt]; dup {
			return nil, fmt.Errorf("%w: line %d: %s has two rows for %d CPUs, %v GB", ErrBadProfile, row.line, model, cpus, mem)
		}
		points[model][pt] = tput
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("%w: no rows", ErrBadProfile)
	}
	profiles := make(Profiles, len(order))
	for _, model := range order {
		p := &Profile{Model: model}
		for pt := range points[model] {
			if !slices.Contains(p.CPUs, pt.cpus) {
				p.CPUs = append(p.CPUs, pt.cpus)
			}
			if !slices.Contains(p.MemGB, pt.mem) {
				p.MemGB = append(p.MemGB, pt.mem)
			}
		}
		slices.Sort(p.CPUs)
		slices.Sort(p.MemGB)
		p.Throughput = make([][]float64, len(p.CPUs))
		for i, c := range p.CPUs {
			p.Throughput[i] = make([]float64, len(p.MemGB))
			for j, m := range p.MemGB {
				v, ok := points[model][point{c, m}]
				if !ok {
					return nil, fmt.Errorf("%w: %s has no row for %d CPUs, %v GB: the grid must be complete", ErrBadProfile, model, c, m)
				}
				p.Throughput[i][j] = v
			}
		}
		profiles[model] = p
	}
	return profiles, nil
}

func parsePositive(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a number > 0", s)
	}
	return v, nil
}

type csvRow struct {
	line   int
	fields []string
}

// readCSV checks the header and returns the data rows with their line
// numbers, so errors can point at the file.
func readCSV(r io.Reader, header []string) ([]csvRow, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(header)
	cr.TrimLeadingSpace = true
	got, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrBadProfile, err)
	}
	for i := range header {
		if strings.TrimSpace(got[i]) != header[i] {
			return nil, fmt.Errorf("%w: header %q, want %q", ErrBadProfile, strings.Join(got, ","), strings.Join(header, ","))
		}
	}
	var rows []csvRow
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadProfile, err)
		}
		line, _ := cr.FieldPos(0)
		rows = append(rows, csvRow{line: line, fields: rec})
	}
}
