package localapi_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/node-agent/localapi"
)

// helper is etc/lachesis_progress.py, the few lines a training loop adds.
func helper(t *testing.T) (python, script string) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	_, file, _, _ := runtime.Caller(0)
	return python, filepath.Join(filepath.Dir(file), "..", "..", "etc", "lachesis_progress.py")
}

// runPy runs a Python program with the helper importable and env added.
func runPy(t *testing.T, program string, env ...string) (string, error) {
	t.Helper()
	python, script := helper(t)
	cmd := exec.Command(python, "-c", program)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Dir(script), "PYTHONDONTWRITEBYTECODE=1")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The helper's check command reports through the real socket server and
// prints the agent's answer.
func TestPythonHelperReportsToTheAgent(t *testing.T) {
	h := &fakeHandler{caller: make(chan localapi.Caller, 4)}
	path := serve(t, h)
	python, script := helper(t)
	cmd := exec.Command(python, script, "check")
	cmd.Env = append(os.Environ(), "LACHESIS_PROGRESS="+path, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"iterations": {"job_id"`) {
		t.Fatalf("check: %v\n%s", err, out)
	}
	if c := <-h.caller; c.PID != int32(cmd.Process.Pid) {
		t.Fatalf("the report came from pid %d, the helper ran as %d", c.PID, cmd.Process.Pid)
	}
}

// step() sends the count once per interval, from rank 0 only, and does
// nothing without the variable.
func TestPythonHelperReportsFromRankZeroAtItsInterval(t *testing.T) {
	h := &fakeHandler{caller: make(chan localapi.Caller, 100)}
	path := serve(t, h)
	loop := `
import lachesis_progress, time
p = lachesis_progress.Reporter(interval=1)
for i in range(25):
    p.step()
    time.sleep(0.1)
print(p.count)
`
	for _, tc := range []struct {
		name    string
		env     []string
		reports [2]int // at least, at most
	}{
		{"rank 0 reports every second", []string{"LACHESIS_PROGRESS=" + path, "RANK=0"}, [2]int{2, 3}},
		{"SLURM_PROCID 0 without RANK reports", []string{"LACHESIS_PROGRESS=" + path, "RANK=", "SLURM_PROCID=0"}, [2]int{2, 3}},
		{"SLURM_PROCID 1 does not", []string{"LACHESIS_PROGRESS=" + path, "RANK=", "SLURM_PROCID=1"}, [2]int{0, 0}},
		{"another rank does not", []string{"LACHESIS_PROGRESS=" + path, "RANK=3"}, [2]int{0, 0}},
		{"no variable, no report", []string{"LACHESIS_PROGRESS="}, [2]int{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runPy(t, loop, tc.env...)
			if err != nil || strings.TrimSpace(out) != "25" {
				t.Fatalf("%v\n%s", err, out)
			}
			time.Sleep(100 * time.Millisecond) // the last report's handler
			n := len(h.caller)
			for range n {
				<-h.caller
			}
			if n < tc.reports[0] || n > tc.reports[1] {
				t.Fatalf("%d reports, want %d..%d", n, tc.reports[0], tc.reports[1])
			}
		})
	}
}

// A missing agent, a path that is no socket, or a listener that never
// accepts neither raise into the loop nor hold it up (the time of the
// reports is printed, not asserted).
func TestPythonHelperNeverBlocksOrRaises(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	stuck := socketPath(t)
	os.MkdirAll(filepath.Dir(stuck), 0o755)
	ln, err := net.Listen("unix", stuck)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	loop := `
import lachesis_progress, time
p = lachesis_progress.Reporter(interval=1)
t0 = time.monotonic()
for i in range(200000):
    p.step()
    p._next = 0  # report on every step: the worst case
    if i == 20:
        break
print("%.3f" % (time.monotonic() - t0))
`
	for _, target := range []string{filepath.Join(dir, "absent.sock"), file, dir, stuck} {
		out, err := runPy(t, loop, "LACHESIS_PROGRESS="+target, "RANK=0")
		if err != nil {
			t.Fatalf("%s: the loop failed: %v\n%s", target, err, out)
		}
		t.Logf("%s: 21 reports in %s s", filepath.Base(target), strings.TrimSpace(out))
	}
}
