package testenv

import (
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
	"testing"
)

// User creates the local system user name if it is missing (useradd, as
// root; Unavailable otherwise) and returns its credentials with its home
// directory, which it creates with mode 0755 owned by the user. The user
// is left in place for later tests: names are fixed, so nothing piles up.
func User(t testing.TB, name string) (cred *syscall.Credential, home string) {
	t.Helper()
	u := EnsureUser(t, name)
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{uint32(gid)}}
	// A fresh home under a root-owned 0755 directory, as /home is.
	base, err := os.MkdirTemp("", "home")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	home = base + "/" + name
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	return cred, home
}

// EnsureUser creates the local system user name (no home, no login shell)
// if it is missing and returns it. Tests run in parallel, and test binaries
// of several packages at once, while useradd refuses to run when another
// holds /etc/passwd's lock ("cannot lock /etc/passwd; try again later"):
// every caller takes one machine-wide file lock around the lookup and the
// useradd, so two tests asking for the same user create it once.
func EnsureUser(t testing.TB, name string) *user.User {
	t.Helper()
	if u, err := user.Lookup(name); err == nil {
		return u
	}
	if os.Geteuid() != 0 {
		Unavailable(t, "creating test users needs root")
	}
	unlock, err := Lock("useradd")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if u, err := user.Lookup(name); err == nil {
		return u // created by another test while this one waited
	}
	out, err := exec.Command("useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
		"--shell", "/usr/sbin/nologin", name).CombinedOutput()
	if err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
