package profiler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Budgets of the bandwidth measurements. The disk read stops at whichever
// of its budgets comes first, so a multi-terabyte dataset costs seconds,
// not hours; the copy is large enough to defeat CPU caches many times over.
const (
	diskReadBudgetBytes = 1 << 30
	diskReadBudgetTime  = 10 * time.Second
	diskReadBlock       = 1 << 20
	memCopyBytes        = 256 << 20
	memCopyRounds       = 3
)

// datasetFiles lists the regular files of a dataset (a file or a directory
// tree) that the caller can read, and their total size; it runs as the
// requesting user (AsUser), so the kernel decides what that is. A root the
// user cannot read fails; inside the tree, directories and files they
// cannot read are left out and counted in skipped, as their own du would
// leave them out. Symlinks inside the tree are not followed; the root is
// resolved first (as the user), so a dataset given as a link to the
// user's own data is measured.
//
// A walk or read of a huge tree stops when ctx ends (max_sweep_seconds).
func datasetFiles(ctx context.Context, path string) (files []string, total int64, skipped int, err error) {
	root, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("dataset %s: %w", path, err)
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			if p != root && errors.Is(err, fs.ErrPermission) {
				skipped++
				if d != nil && d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		// Listing a directory needs no read permission on its files.
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			if p == root {
				return &os.PathError{Op: "open", Path: p, Err: err}
			}
			skipped++
			return nil
		}
		unix.Close(fd)
		files = append(files, p)
		total += info.Size()
		return nil
	})
	if err != nil {
		return nil, 0, skipped, fmt.Errorf("dataset %s: %w", path, err)
	}
	return files, total, skipped, nil
}

// diskReadMode says how the disk was reached, for the log.
type diskReadMode string

const (
	readDirect  diskReadMode = "O_DIRECT"
	readDropped diskReadMode = "fadvise(DONTNEED)"
)

// diskReadBW measures how fast the dataset's files read from their
// storage: sequentially, 1 MiB at a time, with O_DIRECT so the page cache
// neither serves nor keeps the data. Where O_DIRECT is refused (tmpfs,
// some network and overlay file systems) the file's cached pages are
// dropped with posix_fadvise(DONTNEED) first and it is read normally; pages
// that others hold mapped or dirty stay cached and make that figure an
// overestimate. Sequential reads of large blocks are the best case for
// the disk: a loader reading many small files randomly sees less, so the
// memory model's disk-bound throughput is optimistic.
func diskReadBW(files []string) (float64, diskReadMode, error) {
	buf, err := unix.Mmap(-1, 0, diskReadBlock, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return 0, "", fmt.Errorf("disk read buffer: %w", err)
	}
	defer unix.Munmap(buf) // page-aligned, as O_DIRECT requires
	mode := readDirect
	var n int64
	var spent time.Duration
	for _, path := range files {
		if n >= diskReadBudgetBytes || spent >= diskReadBudgetTime {
			break
		}
		start := time.Now()
		got, m, err := readFileUncached(path, buf, diskReadBudgetBytes-n)
		spent += time.Since(start)
		if err != nil {
			return 0, "", err
		}
		n += got
		if m == readDropped {
			mode = readDropped
		}
	}
	if n == 0 || spent <= 0 {
		return 0, mode, nil
	}
	return float64(n) / spent.Seconds(), mode, nil
}

// readFileUncached reads up to limit bytes of path past the page cache.
func readFileUncached(path string, buf []byte, limit int64) (int64, diskReadMode, error) {
	mode := readDirect
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		mode = readDropped
		if fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return 0, mode, &os.PathError{Op: "open", Path: path, Err: err}
		}
		_ = unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var n int64
	for n < limit {
		k, err := f.Read(buf)
		n += int64(k)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if mode == readDirect && n == 0 && errors.Is(err, unix.EINVAL) {
				// Opened with O_DIRECT but reads refused: drop and retry.
				_ = unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
				if _, err := f.Seek(0, io.SeekStart); err == nil {
					if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, 0); err == nil {
						mode = readDropped
						continue
					}
				}
			}
			return n, mode, fmt.Errorf("read %s: %w", path, err)
		}
	}
	return n, mode, nil
}

// warmCache reads the dataset once through the page cache, so the CPU
// sweep runs with the dataset in memory, as Synergy's does: the sweep
// measures CPU sensitivity, the memory model adds the disk. It does so only
// when the dataset fits in half the memory available now; a larger dataset
// cannot be cached anyway and is read at disk speed by the first points.
func warmCache(ctx context.Context, files []string, total int64) (bool, error) {
	avail, err := memInfo("MemAvailable:")
	if err != nil || total > avail/2 {
		return false, err
	}
	buf := make([]byte, diskReadBlock)
	for _, path := range files {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		f, err := os.Open(path)
		if err != nil {
			return false, err
		}
		_, err = io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
		f.Close()
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// memBW measures memory bandwidth as the best of a few timed copies of a
// buffer much larger than the CPU caches. A loader reading a cached sample
// makes the kernel copy it from the page cache into its buffer, a copy of
// the same kind on one core; so one core's copy rate, not the machine's
// aggregate bandwidth, is what the memory model's cached reads cost.
func memBW() (float64, error) {
	alloc := func() ([]byte, error) {
		return unix.Mmap(-1, 0, memCopyBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	}
	// Anonymous mappings, unmapped at once, keep 512 MiB out of the Go heap
	// of a long-running agent.
	src, err := alloc()
	if err != nil {
		return 0, fmt.Errorf("memory bandwidth buffer: %w", err)
	}
	defer unix.Munmap(src)
	dst, err := alloc()
	if err != nil {
		return 0, fmt.Errorf("memory bandwidth buffer: %w", err)
	}
	defer unix.Munmap(dst)
	// Fill (and fault in) the source by doubling copies rather than a byte
	// loop, which the race detector would make take minutes.
	for i := range 4096 {
		src[i] = byte(i * 7)
	}
	for n := 4096; n < len(src); n *= 2 {
		copy(src[n:], src[:n])
	}
	copy(dst, src)
	best := time.Duration(1<<63 - 1)
	for range memCopyRounds {
		start := time.Now()
		copy(dst, src)
		best = min(best, time.Since(start))
	}
	return float64(memCopyBytes) / best.Seconds(), nil
}

// memInfo is a /proc/meminfo value in bytes.
func memInfo(key string) (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	v := field(b, key)
	if v == 0 {
		return 0, fmt.Errorf("/proc/meminfo has no %s", key)
	}
	return v << 10, nil
}
