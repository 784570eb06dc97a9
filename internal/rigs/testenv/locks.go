package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir holds the machine-wide lock files of tests (useradd, port
// blocks). /run is root's own (0755), unlike /tmp, where another user
// could plant a link for root to follow; tests that take these locks run
// as root.
const lockDir = "/run/lachesis-test"

// Lock takes an exclusive flock on the lock file name in lockDir, waiting
// for whoever holds it (another test or test binary). The lock goes with
// unlock, or with the process if it dies.
func Lock(name string) (unlock func(), err error) {
	f, err := openLock(name)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

// TryLock is Lock without waiting: ok is false when someone else holds it.
func TryLock(name string) (unlock func(), ok bool, err error) {
	f, err := openLock(name)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("flock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, true, nil
}

func openLock(name string) (*os.File, error) {
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(lockDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory (%v)", lockDir, err)
	}
	return os.OpenFile(filepath.Join(lockDir, name), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
}
