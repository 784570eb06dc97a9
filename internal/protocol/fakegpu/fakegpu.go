// Package fakegpu is the record format of the fake GPU device: what a
// process running "on" a fake GPU (lachesis-synth -fake-gpu-dir) writes
// into the device's directory, and the bounded, link-refusing way both
// the node agent (node-agent/telemetry.Fake) and other such processes
// read it. The fake device is for machines without GPUs (the loopback
// cluster, the demo, CI), never a production node.
package fakegpu

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Record is one process's use of fake GPUs, refreshed while it runs.
type Record struct {
	PID int `json:"pid"`
	// GPUs are node-wide indexes of the fake GPUs the process runs on.
	GPUs    []int   `json:"gpus"`
	UtilPct float64 `json:"util_pct"`
	MemMB   float64 `json:"mem_mb"`
	// Model is the process's model key ("" for none), which the synthetic
	// job's neighbours look up in the pair table (at most MaxModel bytes
	// of printable text; the agent does not read it).
	Model string `json:"model,omitempty"`
}

// MaxModel bounds Record.Model, like the pair table's model names.
const MaxModel = 128

// Bounds on the directory, which every local user may write.
const (
	// MaxRecords: entries read from the directory per look.
	MaxRecords = 256
	// MaxRecordBytes: a larger file is not read.
	MaxRecordBytes = 4096
	// Stale: a record not refreshed for this long is not believed (its
	// process hung, or its pid was reused).
	Stale = 30 * time.Second
	// Refresh is how often a running process rewrites its record.
	Refresh = time.Second
	// MemTotalMB is each fake GPU's memory.
	MemTotalMB = 81920
)

// Why a record is not read (a file that is not a record).
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("too large")
	ErrMalformed  = errors.New("malformed")
)

// FileName is the record file of pid.
func FileName(pid int) string { return strconv.Itoa(pid) + ".json" }

// Write replaces pid's record in dir atomically (a temporary file renamed
// over it), so that a reader never sees half a record.
func Write(dir string, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, FileName(r.PID)))
}

// List names at most MaxRecords entries of dir; more says there were
// others, not listed.
func List(dir string) (names []string, more bool, err error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, false, err
	}
	defer d.Close()
	names, err = d.Readdirnames(MaxRecords + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, err
	}
	if len(names) > MaxRecords {
		return names[:MaxRecords], true, nil
	}
	return names, false, nil
}

// File is a record as read, with what the kernel says about its file.
type File struct {
	Record
	// UID owns the file: the only user who can have written it, in a
	// sticky directory.
	UID     uint32
	ModTime time.Time
}

// Read reads one record file without following a link or blocking on a
// FIFO, and only a regular file of at most MaxRecordBytes holding one
// record with no unknown field (ErrNotRegular, ErrTooLarge, ErrMalformed).
// It does not judge the numbers.
func Read(path string) (File, error) {
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return File{}, fmt.Errorf("%w: %v", ErrNotRegular, err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return File{}, ErrNotRegular
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return File{}, ErrNotRegular
	}
	if fi.Size() > MaxRecordBytes {
		return File{}, ErrTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(fh, MaxRecordBytes+1))
	if err != nil {
		return File{}, fmt.Errorf("%w: %v", ErrNotRegular, err)
	}
	if len(b) > MaxRecordBytes {
		return File{}, ErrTooLarge
	}
	f := File{UID: st.Uid, ModTime: fi.ModTime()}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f.Record); err != nil {
		return File{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(f.Model) > MaxModel || strings.IndexFunc(f.Model, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return File{}, fmt.Errorf("%w: model of %d bytes or with control characters", ErrMalformed, len(f.Model))
	}
	return f, nil
}
