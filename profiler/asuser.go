package profiler

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNoAccess: the user a request runs as may not read a path it named.
var ErrNoAccess = errors.New("profiler: no access")

// AsUser runs fn on an OS thread whose file-system identity (fsuid,
// fsgid, supplementary groups) is cred's, so that every file fn opens is
// opened with the user's permissions: the kernel, not a mode-bit check of
// ours, decides what the user can reach, symlinks and ".." included, and
// ACLs count. nil runs fn as the process itself.
//
// Linux keeps credentials per thread; setfsuid and setgroups as raw
// syscalls change only the calling one (glibc and Go's syscall.Setuid
// would change them all). The thread is locked to a goroutine that exits
// without unlocking it, so the runtime throws the thread away afterwards
// instead of reusing it with the user's identity, and the runtime never
// clones new threads from a locked one. Changing fsuid from 0 drops the
// thread's CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, so root's bypass of
// permission checks goes with it.
func AsUser(cred *syscall.Credential, fn func() error) error {
	if cred == nil {
		return fn()
	}
	if os.Geteuid() != 0 {
		if uint32(os.Geteuid()) == cred.Uid {
			return fn() // already the user
		}
		return fmt.Errorf("%w: acting as uid %d needs root", ErrNoAccess, cred.Uid)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread dies with this goroutine.
		if err := becomeUser(cred); err != nil {
			done <- err
			return
		}
		done <- fn()
	}()
	return <-done
}

func becomeUser(cred *syscall.Credential) error {
	groups := make([]uint32, len(cred.Groups))
	copy(groups, cred.Groups)
	var ptr unsafe.Pointer
	if len(groups) > 0 {
		ptr = unsafe.Pointer(&groups[0])
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(ptr), 0); e != 0 {
		return fmt.Errorf("setgroups for uid %d: %w", cred.Uid, e)
	}
	// setfsgid/setfsuid report the previous value, not errors: set, then
	// read back (setting -1 changes nothing and returns the current one).
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(cred.Gid), 0, 0)
	if g, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0); uint32(g) != cred.Gid {
		return fmt.Errorf("%w: setfsgid(%d) did not take", ErrNoAccess, cred.Gid)
	}
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(cred.Uid), 0, 0)
	if u, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0); uint32(u) != cred.Uid {
		return fmt.Errorf("%w: setfsuid(%d) did not take", ErrNoAccess, cred.Uid)
	}
	return nil
}

// CheckDataset checks, as cred, that path (absolute) exists and can be
// read: opened, and listed if it is a directory. It fails with ErrBadSpec
// for a path that is not there and ErrNoAccess for one the user may not
// read; the measurement itself runs as the user again, so this is for an
// early, clear answer, not the guard.
func CheckDataset(path string, cred *syscall.Credential) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%w: dataset %q is not an absolute path", ErrBadSpec, path)
	}
	return AsUser(cred, func() error {
		f, err := os.Open(path)
		if err == nil {
			defer f.Close()
			var fi os.FileInfo
			if fi, err = f.Stat(); err == nil && fi.IsDir() {
				_, err = f.ReadDir(1)
				if errors.Is(err, io.EOF) {
					err = nil
				}
			}
		}
		return datasetErr(path, err)
	})
}

func datasetErr(path string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: dataset %s does not exist", ErrBadSpec, path)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: you may not read the dataset %s", ErrNoAccess, path)
	}
	return fmt.Errorf("%w: dataset %s: %w", ErrBadSpec, path, err)
}

// LookPath finds the command name as the user cred would: on the PATH of
// env (the user's environment, not the agent's), each directory searched
// with the user's permissions, the file executable by the user. A name
// with a slash is taken as it is (relative to dir); exec, as the user,
// checks it. PATH entries that are not absolute are skipped: they would
// mean the agent's working directory, not the user's.
func LookPath(name string, env []string, dir string, cred *syscall.Credential) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) && dir != "" {
			name = filepath.Join(dir, name)
		}
		return name, nil
	}
	pathEnv, ok := "", false
	for _, kv := range env {
		if v, found := strings.CutPrefix(kv, "PATH="); found {
			pathEnv, ok = v, true // the last one wins, as in exec
		}
	}
	if !ok {
		return "", fmt.Errorf("%w: no PATH in the environment sent to find %q in; give the command's absolute path", ErrBadSpec, name)
	}
	var found string
	err := AsUser(cred, func() error {
		for _, d := range filepath.SplitList(pathEnv) {
			if !filepath.IsAbs(d) {
				continue
			}
			p := filepath.Join(d, name)
			fi, err := os.Stat(p) // as the user: a directory they cannot search fails here
			if err != nil || !fi.Mode().IsRegular() || !mayExecute(p, fi, cred) {
				continue
			}
			found = p
			return nil
		}
		return fmt.Errorf("%w: %q is not an executable file on your PATH (%s); give the command's absolute path", ErrBadSpec, name, pathEnv)
	})
	return found, err
}

// mayExecute asks the kernel whether this thread's file-system identity
// (the user's, under AsUser) may execute p, ACLs included: faccessat2 with
// AT_EACCESS checks the fsuid, where access(2) would check the real uid
// (root). Kernels before 5.8 lack it; the mode bits decide there.
func mayExecute(p string, fi os.FileInfo, cred *syscall.Credential) bool {
	err := unix.Faccessat2(unix.AT_FDCWD, p, unix.X_OK, unix.AT_EACCESS)
	if errors.Is(err, unix.ENOSYS) {
		return executableBy(fi, cred)
	}
	return err == nil
}

// executableBy applies the execute bits as the kernel would for cred
// (root may execute a file with any execute bit).
func executableBy(fi os.FileInfo, cred *syscall.Credential) bool {
	mode := uint32(fi.Mode().Perm())
	uid := uint32(os.Geteuid())
	var groups []uint32
	if cred != nil {
		uid, groups = cred.Uid, append([]uint32{cred.Gid}, cred.Groups...)
	} else {
		groups = []uint32{uint32(os.Getegid())}
	}
	if uid == 0 {
		return mode&0o111 != 0
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	switch {
	case st.Uid == uid:
		return mode&0o100 != 0
	case containsGID(groups, st.Gid):
		return mode&0o010 != 0
	}
	return mode&0o001 != 0
}

func containsGID(gs []uint32, g uint32) bool {
	for _, x := range gs {
		if x == g {
			return true
		}
	}
	return false
}
