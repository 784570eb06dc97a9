package sharing

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// MaxRows bounds the rows ReadGavel reads from either file, and MaxLine a
// line's length: Gavel's files have 493 and 2,029 lines of under 80 bytes.
const (
	MaxRows = 100000
	MaxLine = 4096
)

// GavelName is the model name of a Gavel measurement: its model, and
// "/bs" and its batch size where it has one (batch 0), as the simulator's
// sim.GavelModel prints it, so jobs and table entries meet on one name.
func GavelName(model string, batch int) string {
	if batch == 0 {
		return model
	}
	return model + "/bs" + strconv.Itoa(batch)
}

// ModelKey is the one mapping between a model's names: Gavel's are mixed
// case ("ResNet-50/bs64", GavelName), a Slurm job's model key is what its
// owner wrote (--comment=model=resnet-50/bs64), and slurmctld's core
// lower-cases it (as placement's table does). The pair table keys every
// entry by ModelKey, so a lookup by any of these spellings meets the same
// entry; nothing else needs to convert.
func ModelKey(name string) string {
	return strings.ToLower(strings.TrimSpace(name))
}

// ReadGavel seeds a table from Gavel's measurements on one GPU type (k80,
// p100 or v100): solo is data/gavel/throughputs.csv (gpu_type, placement,
// model, batch_size, num_gpus, throughput), colocated is
// data/gavel/colocated.csv (gpu_type, model_a, batch_size_a, model_b,
// batch_size_b, throughput_a, throughput_b). Each fraction is a model's
// co-located throughput over its throughput alone on one GPU of the type,
// consolidated. A pair whose solo figure is missing or 0 (did not run) is
// left out: no fraction can be computed. Rows of other types are skipped.
// Any malformed row (a missing column, a number that does not parse, NaN,
// a negative throughput, a name over the limits, a fraction above
// Limits.MaxFraction) fails the whole read with its line.
func ReadGavel(solo, colocated io.Reader, gpuType string, l Limits) (*Table, error) {
	t := NewTable(l)
	alone := map[string]float64{}
	err := readRows(solo, []string{"gpu_type", "placement", "model", "batch_size", "num_gpus", "throughput"},
		func(line int, f func(string) string) error {
			if f("gpu_type") != gpuType || f("placement") != "consolidated" || f("num_gpus") != "1" {
				return nil
			}
			name, err := t.gavelName(f("model"), f("batch_size"))
			if err != nil {
				return err
			}
			v, err := throughput(f("throughput"))
			if err != nil {
				return err
			}
			alone[name] = v
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("solo throughputs: %w", err)
	}
	err = readRows(colocated, []string{"gpu_type", "model_a", "batch_size_a", "model_b", "batch_size_b", "throughput_a", "throughput_b"},
		func(line int, f func(string) string) error {
			if f("gpu_type") != gpuType {
				return nil
			}
			a, err := t.gavelName(f("model_a"), f("batch_size_a"))
			if err != nil {
				return err
			}
			b, err := t.gavelName(f("model_b"), f("batch_size_b"))
			if err != nil {
				return err
			}
			ta, err := throughput(f("throughput_a"))
			if err != nil {
				return err
			}
			tb, err := throughput(f("throughput_b"))
			if err != nil {
				return err
			}
			sa, sb := alone[a], alone[b]
			if sa <= 0 || sb <= 0 {
				return nil
			}
			return t.Seed(a, b, ta/sa, tb/sb)
		})
	if err != nil {
		return nil, fmt.Errorf("co-located throughputs: %w", err)
	}
	if t.Len() == 0 {
		return nil, fmt.Errorf("%w: no co-located pair measured on %q", ErrBadEntry, gpuType)
	}
	return t, nil
}

func (t *Table) gavelName(model, batch string) (string, error) {
	b, err := strconv.Atoi(batch)
	if err != nil || b < 0 || b > 1<<20 {
		return "", fmt.Errorf("%w: batch size %q", ErrBadEntry, batch)
	}
	name := GavelName(model, b)
	return name, t.checkName(name)
}

func throughput(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("%w: throughput %q is not a finite number >= 0", ErrBadEntry, s)
	}
	return v, nil
}

// readRows reads a CSV with a header naming at least the required columns
// and calls each with every row (a field getter by column name), bounded
// by MaxRows and MaxLine.
func readRows(r io.Reader, required []string, each func(line int, field func(string) string) error) error {
	cr := csv.NewReader(&lineLimiter{r: r})
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return fmt.Errorf("%w: header: %w", ErrBadEntry, err)
	}
	cols := map[string]int{}
	for i, h := range header {
		cols[strings.TrimSpace(h)] = i
	}
	for _, c := range required {
		if _, ok := cols[c]; !ok {
			return fmt.Errorf("%w: header lacks column %q", ErrBadEntry, c)
		}
	}
	for rows := 0; ; rows++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBadEntry, err)
		}
		if rows >= MaxRows {
			return fmt.Errorf("%w: more than %d rows", ErrBadEntry, MaxRows)
		}
		line, _ := cr.FieldPos(0)
		field := func(name string) string {
			i := cols[name]
			if i >= len(rec) {
				return ""
			}
			return strings.TrimSpace(rec[i])
		}
		if err := each(line, field); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
	}
}

// errLongLine is returned by lineLimiter for a line over MaxLine bytes.
var errLongLine = errors.New("line too long")

// lineLimiter fails a read once a line exceeds MaxLine bytes, so a file
// without newlines cannot make the CSV reader buffer it whole.
type lineLimiter struct {
	r   io.Reader
	cur int
}

func (l *lineLimiter) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for i := 0; i < n; i++ {
		if p[i] == '\n' {
			l.cur = 0
			continue
		}
		if l.cur++; l.cur > MaxLine {
			return i, fmt.Errorf("%w: %w (over %d bytes)", ErrBadEntry, errLongLine, MaxLine)
		}
	}
	return n, err
}
