package trace

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Format names a trace format.
type Format string

const (
	// FormatAuto recognises the format from the file's first line.
	FormatAuto Format = "auto"
	// FormatPhilly is the Philly job table: timestamp,duration,num_gpus,gpu_time,cluster.
	FormatPhilly Format = "philly"
	// FormatTiresias is the Tiresias simulator's job file:
	// job_id,num_gpu,submit_time,iterations,model_name,duration,interval.
	FormatTiresias Format = "tiresias"
	// FormatJobList is Lachesis's plain job list (see ReadJobList).
	FormatJobList Format = "joblist"
	// FormatSacct is `sacct --parsable2` output (see ReadSacct).
	FormatSacct Format = "sacct"
)

// LoadTrace reads a trace file. Its name (without directory) names the
// trace in reports.
func Load(path string, format Format) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(bufio.NewReaderSize(f, 1<<16), filepath.Base(path), format)
}

// LoadSacct reads a file of sacct output (ReadSacct) and names the trace
// after it, as Load does.
func LoadSacct(path string, opts SacctOptions) (*Trace, SacctStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, SacctStats{}, err
	}
	defer f.Close()
	t, st, err := ReadSacct(f, opts)
	if err != nil {
		return nil, st, err
	}
	t.Name = filepath.Base(path)
	return t, st, nil
}

// ReadTrace reads a trace in the given format from r.
func Read(r io.Reader, name string, format Format) (*Trace, error) {
	if format == FormatAuto || format == "" {
		br := bufio.NewReader(r)
		head, err := br.Peek(4096)
		if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
			return nil, err
		}
		format = sniff(head)
		r = br
	}
	var t *Trace
	var err error
	switch format {
	case FormatPhilly:
		t, err = ReadPhilly(r)
	case FormatTiresias:
		t, err = ReadTiresias(r)
	case FormatJobList:
		t, err = ReadJobList(r)
	case FormatSacct:
		t, _, err = ReadSacct(r, SacctOptions{})
	default:
		return nil, fmt.Errorf("%w: %s: unknown format %q (philly, tiresias, joblist, sacct)", ErrBadTrace, name, format)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	t.Name = name
	return t, nil
}

// sniff guesses a format from the start of a file.
func sniff(head []byte) Format {
	line := head
	for {
		i := bytes.IndexByte(line, '\n')
		first := line
		if i >= 0 {
			first = line[:i]
		}
		trimmed := strings.TrimSpace(string(first))
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			if i < 0 {
				return FormatJobList
			}
			line = line[i+1:]
			continue
		}
		switch {
		case strings.Contains(trimmed, "|"):
			return FormatSacct
		case strings.Contains(trimmed, "gpu_time") && strings.Contains(trimmed, "timestamp"):
			return FormatPhilly
		case strings.Contains(trimmed, "num_gpu") && strings.Contains(trimmed, "submit_time"):
			return FormatTiresias
		default:
			return FormatJobList
		}
	}
}

// table is a CSV file addressed by column name, so readers do not depend on
// column order and can name the column in errors.
type table struct {
	r    *csv.Reader
	cols map[string]int
}

func newTable(r io.Reader, required []string) (*table, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrBadTrace, err)
	}
	cols := make(map[string]int, len(header))
	for i, h := range header {
		cols[strings.TrimSpace(h)] = i
	}
	for _, name := range required {
		if _, ok := cols[name]; !ok {
			return nil, fmt.Errorf("%w: header %q lacks column %q (need %s)", ErrBadTrace,
				strings.Join(header, ","), name, strings.Join(required, ","))
		}
	}
	return &table{r: cr, cols: cols}, nil
}

// ReadCSV reads a table (a trace, or another input of the simulator such
// as Gavel's throughputs) whose header has the required columns and calls
// each with every data row, in order; the first error stops it.
func ReadCSV(r io.Reader, required []string, each func(row *Row) error) error {
	tab, err := newTable(r, required)
	if err != nil {
		return err
	}
	for {
		rec, err := tab.r.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBadTrace, err)
		}
		line, _ := tab.r.FieldPos(0)
		row := &Row{tab: tab, rec: rec, Line: line}
		if err := each(row); err != nil {
			return err
		}
		if row.Err != nil {
			return row.Err
		}
	}
}

// Row is one data row; Line is its line in the file. Its parsing methods
// keep the first error in Err, for ReadCSV to return, so a reader fills a Job from several columns without
// checking each; the values after an error are zero and unused.
type Row struct {
	tab  *table
	rec  []string
	Line int
	Err  error
}

// Field is the value of a column, "" if the column or the field is absent.
func (r *Row) Field(name string) string {
	i, ok := r.tab.cols[name]
	if !ok || i >= len(r.rec) {
		return ""
	}
	return strings.TrimSpace(r.rec[i])
}

// Float, Int and ID parse a column, keeping the first error.
func (r *Row) Float(col string) float64 {
	return keepFirst(r, parseFloat, col)
}

func (r *Row) Int(col string) int {
	return keepFirst(r, parseInt, col)
}

func (r *Row) ID(col string) uint32 {
	return keepFirst(r, parseID, col)
}

func keepFirst[T any](r *Row, parse func(line int, col, s string) (T, error), col string) T {
	var v T
	if r.Err == nil {
		v, r.Err = parse(r.Line, col, r.Field(col))
	}
	return v
}

func parseFloat(line int, col, s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: line %d: %s %q is not a number", ErrBadTrace, line, col, s)
	}
	return v, nil
}

func parseInt(line int, col, s string) (int, error) {
	if v, err := strconv.Atoi(s); err == nil {
		return v, nil
	}
	// Some exports write integers as "4.0".
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != float64(int(f)) {
		return 0, fmt.Errorf("%w: line %d: %s %q is not an integer", ErrBadTrace, line, col, s)
	}
	return int(f), nil
}

func parseID(line int, col, s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: line %d: %s %q is not a 32-bit unsigned job id", ErrBadTrace, line, col, s)
	}
	return uint32(v), nil
}

// wallClockLayouts are the timestamp layouts accepted where a wall-clock
// time is expected; times without a zone are read as UTC.
var wallClockLayouts = []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02 15:04:05"}

func parseWallClock(s string) (time.Time, error) {
	var err error
	for _, layout := range wallClockLayouts {
		var t time.Time
		if t, err = time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, err
}

// setWallClockSubmits makes each job's Submit its stamp (stamps[i] for
// t.Jobs[i]) in seconds after the earliest one, which becomes t.Start.
// With no stamps it does nothing.
func setWallClockSubmits(t *Trace, stamps []time.Time) {
	if len(stamps) == 0 {
		return
	}
	start := stamps[0]
	for _, s := range stamps {
		if s.Before(start) {
			start = s
		}
	}
	t.Start = start
	for i := range t.Jobs {
		t.Jobs[i].Submit = stamps[i].Sub(start).Seconds()
	}
}
