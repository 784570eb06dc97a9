package mungetest

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/munge"
)

// CanStartMunged says why StartMunged cannot work here ("" when it can):
// munged runs as user munge, which needs root to arrange.
func CanStartMunged() string {
	if os.Geteuid() != 0 {
		return "starting munged needs root"
	}
	for _, bin := range []string{"munged", "runuser"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " is not installed"
		}
	}
	if _, err := exec.Command("id", "-u", "munge").Output(); err != nil {
		return "there is no user munge"
	}
	return ""
}

// StartMunged starts a private munged with a fresh random key in a new
// directory under base (which user munge must be able to reach) and
// returns its socket. The daemon is stopped when the test ends.
func StartMunged(tb testing.TB, base string) string {
	tb.Helper()
	if why := CanStartMunged(); why != "" {
		tb.Fatal(why)
	}
	dir, err := os.MkdirTemp(base, "munged-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		tb.Fatal(err)
	}
	keyFile := filepath.Join(dir, "munge.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command("chown", "-R", "munge:munge", dir).CombinedOutput(); err != nil {
		tb.Fatalf("chown %s: %v: %s", dir, err, out)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	socket := filepath.Join(dir, "munge.socket")
	pidFile := filepath.Join(dir, "munged.pid")
	cmd := exec.Command("runuser", "-u", "munge", "--", "munged",
		"--socket="+socket, "--key-file="+keyFile, "--pid-file="+pidFile,
		"--log-file="+filepath.Join(dir, "munged.log"), "--seed-file="+filepath.Join(dir, "munged.seed"))
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "munged.log"))
		tb.Fatalf("munged did not start: %v: %s\n%s", err, out, log)
	}
	// munged daemonizes; stop it by the pid it wrote, checking the pid is
	// still that munged.
	tb.Cleanup(func() { stopMunged(tb, pidFile, socket) })
	deadline := time.Now().Add(10 * time.Second)
	for {
		cred, err := munge.Encode(socket, []byte("ping"))
		if err == nil {
			if _, _, _, err = munge.Decode(socket, cred); err == nil {
				return socket
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("munged on %s does not answer: %v", socket, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func stopMunged(tb testing.TB, pidFile, socket string) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), socket) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 100; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	tb.Logf("munged pid %d ignored SIGTERM for 5 s; killed", pid)
}
