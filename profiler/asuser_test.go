package profiler

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
)

// writeOwned writes size bytes to path, owned by cred, with mode.
func writeOwned(t *testing.T, path string, size int, mode os.FileMode, cred *syscall.Credential) {
	t.Helper()
	if err := os.WriteFile(path, make([]byte, size), mode); err != nil {
		t.Fatal(err)
	}
	chown(t, path, cred, mode)
}

func chown(t *testing.T, path string, cred *syscall.Credential, mode os.FileMode) {
	t.Helper()
	if err := os.Lchown(path, int(cred.Uid), int(cred.Gid)); err != nil {
		t.Fatal(err)
	}
	if mode != 0 {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
}

// quickSpec profiles a workload that prints a throughput every 50 ms, at
// one CPU, one short point, as cred.
func quickSpec(cred *syscall.Credential, dataset string) SweepSpec {
	return SweepSpec{
		Argv:          []string{"/bin/sh", "-c", "while :; do echo 100 it/s; sleep 0.05; done"},
		Env:           []string{"PATH=/usr/bin:/bin"},
		Dir:           "/",
		PointDuration: time.Second,
		MaxCPUs:       1,
		DatasetPath:   dataset,
		Credential:    cred,
	}
}

// TestDatasetIsMeasuredAsTheUser is the attack of issue 9: user A names
// user B's 0755 home, which holds a 0700 folder, or a link of A's into
// that folder; the agent, root, must measure only what A can read.
func TestDatasetIsMeasuredAsTheUser(t *testing.T) {
	a, homeA := testenv.User(t, "lachesis-ta")
	b, homeB := testenv.User(t, "lachesis-tb")
	private := filepath.Join(homeB, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	chown(t, private, b, 0o700)
	writeOwned(t, filepath.Join(private, "secret.bin"), 3_333_333, 0o644, b)
	writeOwned(t, filepath.Join(homeB, "public.bin"), 4096, 0o644, b)
	writeOwned(t, filepath.Join(homeB, "mine-only.bin"), 8192, 0o600, b)
	link := filepath.Join(homeA, "data")
	if err := os.Symlink(private, link); err != nil {
		t.Fatal(err)
	}
	chown(t, link, a, 0)

	tests := []struct {
		name      string
		path      string
		wantBytes int64
		wantErr   error
	}{
		{"B's home counts only B's public file", homeB, 4096, nil},
		{"B's home with a trailing slash counts only the public file", homeB + "/", 4096, nil},
		{"a link into B's private folder with a trailing slash is refused", link + "/", 0, ErrNoAccess},
		{"a link into B's private folder is refused", link, 0, ErrNoAccess},
		{"B's private folder itself is refused", private, 0, ErrNoAccess},
		{"a file in B's private folder is refused", filepath.Join(private, "secret.bin"), 0, ErrNoAccess},
		{"B's 0600 file is refused", filepath.Join(homeB, "mine-only.bin"), 0, ErrNoAccess},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckDataset(tc.path, a); !errors.Is(err, tc.wantErr) {
				t.Errorf("CheckDataset: got %v, want %v", err, tc.wantErr)
			}
			rec, err := Profile(context.Background(), "m", quickSpec(a, tc.path), nil)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Profile: got %v, want %v", err, tc.wantErr)
			}
			if err == nil && rec.DatasetBytes != tc.wantBytes {
				t.Fatalf("dataset %d bytes, want %d (what uid %d can read)", rec.DatasetBytes, tc.wantBytes, a.Uid)
			}
		})
	}
	// B, the owner, sees it all: the limits are A's, not the agent's.
	rec, err := Profile(context.Background(), "m", quickSpec(b, homeB), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(3_333_333 + 4096 + 8192); rec.DatasetBytes != want {
		t.Fatalf("B's own dataset: %d bytes, want %d", rec.DatasetBytes, want)
	}
}

// TestCommandIsFoundOnTheUsersPath is issue 10's python3: a directory
// only root may enter, first on the PATH, holds a shim; the workload must
// be found where the user can reach it, not fail with permission denied.
func TestCommandIsFoundOnTheUsersPath(t *testing.T) {
	a, homeA := testenv.User(t, "lachesis-ta")
	rootOnly, err := os.MkdirTemp("", "shims")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(rootOnly)
	if err := os.Chmod(rootOnly, 0o700); err != nil {
		t.Fatal(err)
	}
	const name = "lachesis-test-tool"
	if err := os.WriteFile(filepath.Join(rootOnly, name), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	userBin := filepath.Join(homeA, "bin")
	if err := os.Mkdir(userBin, 0o755); err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(userBin, name)
	if err := os.WriteFile(tool, []byte("#!/bin/sh\nwhile :; do echo 100 it/s; sleep 0.05; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notExec := filepath.Join(homeA, "noexec")
	os.Mkdir(notExec, 0o755)
	os.WriteFile(filepath.Join(notExec, name), []byte("#!/bin/sh\n"), 0o644)

	tests := []struct {
		name, path string
		want       string
		wantErr    error
	}{
		{"the shim root alone may reach is passed over", rootOnly + ":" + userBin, tool, nil},
		{"a file the user may not execute is passed over", notExec + ":" + userBin, tool, nil},
		{"relative PATH entries are skipped", "bin:" + userBin, tool, nil},
		{"only the shim is an error asking for an absolute path", rootOnly, "", ErrBadSpec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LookPath(name, []string{"HOME=/x", "PATH=" + tc.path}, homeA, a)
			if !errors.Is(err, tc.wantErr) || got != tc.want {
				t.Fatalf("got %q, %v; want %q, %v", got, err, tc.want, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "absolute path") {
				t.Fatalf("error %q does not ask for an absolute path", err)
			}
		})
	}
	if _, err := LookPath(name, []string{"HOME=/x"}, homeA, a); !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), "absolute path") {
		t.Fatalf("no PATH: got %v", err)
	}
	// End to end: the workload named by its bare name runs, as A, from A's
	// PATH, although root's PATH would find the shim first.
	t.Setenv("PATH", rootOnly+":"+os.Getenv("PATH"))
	spec := quickSpec(a, "")
	spec.Argv = []string{name}
	spec.Env = []string{"PATH=" + rootOnly + ":" + userBin}
	rec, err := Profile(context.Background(), "m", spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.CPUSweep) != 1 || rec.CPUSweep[0].Throughput <= 0 {
		t.Fatalf("sweep %+v", rec.CPUSweep)
	}
}
