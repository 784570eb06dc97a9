package gpucheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// App is one compute process as nvidia-smi --query-compute-apps lists it.
type App struct {
	PID  int
	UUID string
	Name string
	// MemMiB is its used_memory; MemKnown is false where the driver
	// prints [N/A] (some virtualised GPUs, MPS on some drivers).
	MemMiB   float64
	MemKnown bool
}

// PmonSample is one line of nvidia-smi pmon: one process in one second.
type PmonSample struct {
	GPU     int
	PID     int
	Type    string // C, G, M, M+C, ...
	SM      float64
	SMKnown bool // false for "-": no sample in that second
	FBMiB   float64
	FBKnown bool
	Command string
}

// GPUInfo is one GPU as nvidia-smi --query-gpu reports it.
type GPUInfo struct {
	Index         int
	UUID          string
	MemTotalMiB   float64
	MemUsedMiB    float64
	UtilPct       float64
	UtilKnown     bool
	DriverVersion string
	Name          string
}

// Driver is what the driver itself reports, beside which the agent's
// figures are printed: nvidia-smi (NvidiaSMI), or canned output in tests.
type Driver interface {
	ComputeApps(ctx context.Context) ([]App, error)
	// Pmon samples every process once a second for seconds seconds.
	Pmon(ctx context.Context, seconds int) ([]PmonSample, error)
	GPUs(ctx context.Context) ([]GPUInfo, error)
}

// NvidiaSMI runs the nvidia-smi that comes with the driver.
type NvidiaSMI struct {
	Path string // "nvidia-smi" when empty: found on PATH
}

var _ Driver = NvidiaSMI{}

// maxSMIOutput bounds what is read of one nvidia-smi run: a node with
// thousands of processes prints far less.
const maxSMIOutput = 4 << 20

// smiTimeout bounds a query; pmon gets its sampling time on top.
const smiTimeout = 30 * time.Second

func (s NvidiaSMI) run(ctx context.Context, timeout time.Duration, args ...string) (string, error) {
	path := s.Path
	if path == "" {
		path = "nvidia-smi"
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{w: &stderr, left: 64 << 10}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	b, rerr := io.ReadAll(io.LimitReader(out, maxSMIOutput+1))
	_, _ = io.Copy(io.Discard, out)
	werr := cmd.Wait()
	switch {
	case rerr != nil:
		return "", fmt.Errorf("%s %s: %w", path, strings.Join(args, " "), rerr)
	case len(b) > maxSMIOutput:
		return "", fmt.Errorf("%s %s: more than %d bytes of output", path, strings.Join(args, " "), maxSMIOutput)
	case werr != nil:
		return "", fmt.Errorf("%s %s: %w: %s", path, strings.Join(args, " "), werr, strings.TrimSpace(stderr.String()))
	}
	return string(b), nil
}

// limitedWriter keeps the first left bytes written to it.
type limitedWriter struct {
	w    io.Writer
	left int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	n := min(len(p), l.left)
	if n > 0 {
		_, _ = l.w.Write(p[:n])
		l.left -= n
	}
	return len(p), nil
}

// ComputeApps implements Driver.
func (s NvidiaSMI) ComputeApps(ctx context.Context) ([]App, error) {
	out, err := s.run(ctx, smiTimeout, "--query-compute-apps=pid,used_memory,gpu_uuid,process_name", "--format=csv,noheader,nounits")
	if err != nil {
		return nil, err
	}
	return ParseComputeApps(out)
}

// Pmon implements Driver.
func (s NvidiaSMI) Pmon(ctx context.Context, seconds int) ([]PmonSample, error) {
	out, err := s.run(ctx, smiTimeout+time.Duration(seconds)*time.Second, "pmon", "-s", "um", "-d", "1", "-c", strconv.Itoa(seconds))
	if err != nil {
		return nil, err
	}
	return ParsePmon(out)
}

// GPUs implements Driver.
func (s NvidiaSMI) GPUs(ctx context.Context) ([]GPUInfo, error) {
	out, err := s.run(ctx, smiTimeout, "--query-gpu=index,uuid,memory.total,memory.used,utilization.gpu,driver_version,name", "--format=csv,noheader,nounits")
	if err != nil {
		return nil, err
	}
	return ParseGPUs(out)
}

// notShown is how nvidia-smi prints a value it does not have.
func notShown(s string) bool {
	return s == "" || s == "-" || strings.HasPrefix(s, "[") || s == "N/A"
}

// ParseComputeApps reads `nvidia-smi --query-compute-apps=pid,used_memory,
// gpu_uuid,process_name --format=csv,noheader,nounits`. The process name
// is last: it is the only field that may hold a comma.
func ParseComputeApps(out string) ([]App, error) {
	rows, err := csvRows(out, 4, "compute apps", "pid, used_memory, gpu_uuid, process_name")
	if err != nil {
		return nil, err
	}
	var apps []App
	for _, r := range rows {
		f := r.fields
		pid, err := strconv.Atoi(f[0])
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("compute apps line %d: pid %q", r.line, f[0])
		}
		a := App{PID: pid, UUID: f[2], Name: f[3]}
		if !notShown(f[1]) {
			if a.MemMiB, err = strconv.ParseFloat(f[1], 64); err != nil || a.MemMiB < 0 {
				return nil, fmt.Errorf("compute apps line %d: used_memory %q", r.line, f[1])
			}
			a.MemKnown = true
		}
		apps = append(apps, a)
	}
	return apps, nil
}

// csvRow is one line of nvidia-smi's --format=csv,noheader,nounits output.
type csvRow struct {
	line   int
	fields []string
}

// csvRows splits such output into rows of n trimmed fields, the last of
// which may hold commas; blank lines and "No running processes found" are
// no rows. want names the fields for the error.
func csvRows(out string, n int, what, want string) ([]csvRow, error) {
	var rows []csvRow
	for i, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "No running") {
			continue
		}
		f := strings.SplitN(line, ",", n)
		if len(f) != n {
			return nil, fmt.Errorf("%s line %d: %q: want %s", what, i+1, line, want)
		}
		for j := range f {
			f[j] = strings.TrimSpace(f[j])
		}
		rows = append(rows, csvRow{line: i + 1, fields: f})
	}
	return rows, nil
}

// ParsePmon reads `nvidia-smi pmon -s um`: its first header line names the
// columns (they differ between drivers: enc, dec, jpg, ofa, ccpm come and
// go), data lines follow; a line whose pid is "-" says a GPU has no
// process that second.
func ParsePmon(out string) ([]PmonSample, error) {
	var cols map[string]int
	var samples []PmonSample
	for i, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if strings.HasPrefix(f[0], "#") {
			// "# gpu pid type sm ..." names them; "# Idx # C/G % ..."
			// (units) does not.
			names := strings.Fields(strings.TrimLeft(line, "# \t"))
			if len(names) > 0 && names[0] == "gpu" {
				cols = map[string]int{}
				for j, n := range names {
					cols[n] = j
				}
			}
			continue
		}
		if cols == nil {
			return nil, fmt.Errorf("pmon line %d: %q before the header", i+1, line)
		}
		get := func(name string) (string, bool) {
			j, ok := cols[name]
			if !ok || j >= len(f) {
				return "", false
			}
			return f[j], true
		}
		pidS, ok := get("pid")
		if !ok {
			return nil, fmt.Errorf("pmon line %d: %q has no pid column", i+1, line)
		}
		if pidS == "-" {
			continue
		}
		var s PmonSample
		var err error
		gpuS, _ := get("gpu")
		if s.GPU, err = strconv.Atoi(gpuS); err != nil {
			return nil, fmt.Errorf("pmon line %d: gpu %q", i+1, gpuS)
		}
		if s.PID, err = strconv.Atoi(pidS); err != nil || s.PID <= 0 {
			return nil, fmt.Errorf("pmon line %d: pid %q", i+1, pidS)
		}
		s.Type, _ = get("type")
		if v, ok := get("sm"); ok && !notShown(v) {
			if s.SM, err = strconv.ParseFloat(v, 64); err != nil {
				return nil, fmt.Errorf("pmon line %d: sm %q", i+1, v)
			}
			s.SMKnown = true
		}
		if v, ok := get("fb"); ok && !notShown(v) {
			if s.FBMiB, err = strconv.ParseFloat(v, 64); err != nil {
				return nil, fmt.Errorf("pmon line %d: fb %q", i+1, v)
			}
			s.FBKnown = true
		}
		if j, ok := cols["command"]; ok && j < len(f) {
			s.Command = strings.Join(f[j:], " ")
		}
		samples = append(samples, s)
	}
	return samples, nil
}

// ParseGPUs reads `nvidia-smi --query-gpu=index,uuid,memory.total,
// memory.used,utilization.gpu,driver_version,name --format=csv,noheader,
// nounits`.
func ParseGPUs(out string) ([]GPUInfo, error) {
	rows, err := csvRows(out, 7, "GPU", "index, uuid, memory.total, memory.used, utilization.gpu, driver_version, name")
	if err != nil {
		return nil, err
	}
	var gpus []GPUInfo
	for _, r := range rows {
		f := r.fields
		g := GPUInfo{UUID: f[1], DriverVersion: f[5], Name: f[6]}
		var errs []error
		num := func(what, s string) float64 {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %q", what, s))
			}
			return v
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil {
			errs = append(errs, fmt.Errorf("index %q", f[0]))
		}
		g.Index = idx
		g.MemTotalMiB = num("memory.total", f[2])
		g.MemUsedMiB = num("memory.used", f[3])
		if !notShown(f[4]) {
			g.UtilPct, g.UtilKnown = num("utilization.gpu", f[4]), true
		}
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("GPU line %d: %w", r.line, err)
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}
