package gpucheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The driver script (scripts/gpu-check.sh) is run here by /bin/sh (dash on
// Debian: no bash-isms pass) in a bundle whose binaries and driver tools
// are stand-ins: what it is checked for is its own logic (phases, the
// loaders' release, their pids handed to the check, the exit status,
// nothing left running), not the GPU's.

const stubLoader = `#!/bin/sh
echo "args $*"
trap 'echo "started mps_pipe=${CUDA_MPS_PIPE_DIRECTORY:-none}"' USR1
trap 'echo "done pid=$$"; exit 0' TERM
[ -n "${LOADER_FAIL:-}" ] && { echo "lachesis-gpuload: the CUDA driver library could not be loaded"; exit 1; }
echo "ready pid=$$"
while :; do sleep 0.05; done
`

const stubCheck = `#!/bin/sh
echo "check $*"
phase=""
json=""
while [ $# -gt 0 ]; do
	case $1 in
	-phase) phase=$2; shift ;;
	-json) json=$2; shift ;;
	-load) echo "load $2"; kill -0 "$(echo "$2" | cut -d: -f2)" || echo "load $2 is not running" ;;
	esac
	shift
done
echo "== phase $phase checked"
echo '{}' >"$json"
[ "$phase" = "${CHECK_FAILS:-}" ] && exit 1
[ "$phase" = "${CHECK_DRIVER_OFF:-}" ] && exit 3
exit 0
`

const stubSMI = `#!/bin/sh
echo "stub nvidia-smi $*"
`

const stubMPS = `#!/bin/sh
if [ "${1:-}" = -d ]; then echo started >"$CUDA_MPS_LOG_DIRECTORY/control.log"; exit 0; fi
read -r cmd
[ "$cmd" = get_server_list ] && echo 4711
exit 0
`

func writeExec(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// runScript runs the script in a stand-in bundle, with MPS's control
// program when mps is set, and returns its output, exit status and output
// directory.
func runScript(t *testing.T, mps bool, env ...string) (string, int, string) {
	t.Helper()
	dir := t.TempDir()
	bundle, bin, out := filepath.Join(dir, "bundle"), filepath.Join(dir, "bin"), filepath.Join(dir, "out")
	for _, d := range []string{bundle, bin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script, err := os.ReadFile("../../../scripts/gpu-check.sh")
	if err != nil {
		t.Fatal(err)
	}
	writeExec(t, filepath.Join(bundle, "gpu-check.sh"), string(script))
	writeExec(t, filepath.Join(bundle, "lachesis-gpuload"), stubLoader)
	writeExec(t, filepath.Join(bundle, "lachesis-gpucheck"), stubCheck)
	writeExec(t, filepath.Join(bin, "nvidia-smi"), stubSMI)
	if mps {
		writeExec(t, filepath.Join(bin, "nvidia-cuda-mps-control"), stubMPS)
	}
	cmd := exec.Command("/bin/sh", filepath.Join(bundle, "gpu-check.sh"), out)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "SETTLE=0")
	cmd.Env = append(cmd.Env, env...)
	b, err := cmd.CombinedOutput()
	rc := 0
	if ee, ok := err.(*exec.ExitError); ok {
		rc = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(b), rc, out
}

// loaderPids are the pids the loaders printed as ready.
func loaderPids(t *testing.T, out string) []int {
	t.Helper()
	var pids []int
	for _, m := range regexp.MustCompile(`loader: ready pid=([0-9]+)`).FindAllStringSubmatch(out, -1) {
		pid, _ := strconv.Atoi(m[1])
		pids = append(pids, pid)
	}
	return pids
}

func assertNoneRunning(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("loader %d still runs after the script", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func TestScriptRunsEveryPhaseAndHandsTheLoadersToTheCheck(t *testing.T) {
	t.Parallel()
	out, rc, dir := runScript(t, true)
	if rc != 0 {
		t.Fatalf("exit %d, want 0:\n%s", rc, out)
	}
	wantAll(t, out,
		"== phase idle checked", "== phase solo checked", "== phase pair checked", "== phase mps checked",
		"== summary: idle:PASS solo:PASS cadence:PASS pair:PASS contended:PASS mps:PASS",
		"loader: args -gpu 0 -busy 50 -mem-mib 1024 -duration 10m -wait-usr1 -period 2s",
		"loader: args -gpu 0 -busy 80 -mem-mib 2048 -duration 10m -wait-usr1",
		"loader: args -gpu 0 -busy 60 -mem-mib 2048 -duration 10m -wait-usr1",
		"loader: args -gpu 0 -busy 25 -mem-mib 6144 -duration 10m -wait-usr1",
		"MPS server list: 4711",
		"control.log: started",
	)
	for _, re := range []string{
		`check -phase cadence -json \S+/cadence.json -load a:[0-9]+:50:1024 -intervals  -cadence 6s\n`,
		`check -phase pair -json \S+/pair.json -load a:[0-9]+:60:2048 -load b:[0-9]+:25:6144 -intervals 5s,5s,5s,30s\n`,
		`check -phase contended -json \S+/contended.json -load a:[0-9]+:80:2048 -load b:[0-9]+:30:6144 -busy-is-demand -intervals 5s,5s\n`,
		`check -phase mps -json \S+/mps.json -load a:[0-9]+:60:2048 -load b:[0-9]+:25:6144 -mps -intervals 5s,5s\n`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("no %s in:\n%s", re, out)
		}
	}
	if strings.Contains(out, "is not running") {
		t.Errorf("the check was handed a loader that was not running:\n%s", out)
	}
	pids := loaderPids(t, out)
	if len(pids) != 8 {
		t.Fatalf("%d loaders ready, want 8 (solo 1, cadence 1, pair 2, contended 2, mps 2):\n%s", len(pids), out)
	}
	// Every loader was released and stopped; the MPS phase's were
	// started with MPS's pipe directory.
	for _, f := range []string{"load-solo-a.log", "load-cadence-a.log", "load-pair-a.log", "load-pair-b.log", "load-contended-a.log", "load-contended-b.log", "load-mps-a.log", "load-mps-b.log"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		log := string(b)
		wantPipe := "started mps_pipe=none"
		if strings.HasPrefix(f, "load-mps") {
			wantPipe = "started mps_pipe=" + filepath.Join(dir, "mps-pipe")
		}
		if !strings.Contains(log, wantPipe) || !strings.Contains(log, "done pid=") {
			t.Errorf("%s: want %q and a done line:\n%s", f, wantPipe, log)
		}
	}
	for _, f := range []string{"report.txt", "idle.json", "solo.json", "cadence.json", "pair.json", "contended.json", "mps.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("no %s: %v", f, err)
		}
	}
	assertNoneRunning(t, pids)
}

func TestScriptSaysSoWhereThereIsNoMPS(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("nvidia-cuda-mps-control"); err == nil {
		t.Skip("this machine has MPS")
	}
	out, rc, _ := runScript(t, false)
	if rc != 0 || !strings.Contains(out, "no MPS on this machine: nvidia-cuda-mps-control not found") ||
		!strings.Contains(out, "mps:SKIPPED(no-MPS)") {
		t.Fatalf("exit %d:\n%s", rc, out)
	}
	assertNoneRunning(t, loaderPids(t, out))
}

func TestScriptExitsOneWhenAPhaseDisagrees(t *testing.T) {
	t.Parallel()
	out, rc, _ := runScript(t, false, "CHECK_FAILS=pair")
	if rc != 1 || !strings.Contains(out, "pair:FAIL") || !strings.Contains(out, "DISAGREED") {
		t.Fatalf("exit %d, want 1 with pair:FAIL:\n%s", rc, out)
	}
	assertNoneRunning(t, loaderPids(t, out))
}

func TestScriptPassesAPhaseWhereOnlyTheDriverIsOff(t *testing.T) {
	t.Parallel()
	out, rc, _ := runScript(t, false, "CHECK_DRIVER_OFF=pair")
	if rc != 0 || !strings.Contains(out, "pair:PASS(driver-off)") {
		t.Fatalf("exit %d, want 0 with pair:PASS(driver-off):\n%s", rc, out)
	}
	assertNoneRunning(t, loaderPids(t, out))
}

func TestScriptExitsTwoWhenALoaderCannotStart(t *testing.T) {
	t.Parallel()
	out, rc, _ := runScript(t, false, "LOADER_FAIL=1")
	if rc != 2 || !strings.Contains(out, "loader a ended before it was ready:") ||
		!strings.Contains(out, "the CUDA driver library could not be loaded") || !strings.Contains(out, "solo:ERROR") {
		t.Fatalf("exit %d, want 2 naming the loader's failure:\n%s", rc, out)
	}
}

func TestScriptExitsTwoWithoutNvidiaSMI(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		t.Skip("this machine has nvidia-smi")
	}
	dir := t.TempDir()
	cmd := exec.Command("/bin/sh", "../../../scripts/gpu-check.sh", dir)
	cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
	b, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(b), "nvidia-smi not found") {
		t.Fatalf("err %v, want exit 2 naming nvidia-smi:\n%s", err, b)
	}
}
