package procjob

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Bounds of what is read of one /proc file: far above what the kernel
// writes there for the fields read (status ~1.5 KB, stat ~300 bytes, a
// cgroup file one line per hierarchy); a slurmstepd's title is its first
// bytes.
const (
	maxProcFile = 64 << 10
	maxTitle    = 4 << 10
)

// errTooLarge: a /proc file over its bound.
var errTooLarge = errors.New("larger than expected")

// procPath is /proc/<pid>/<name>.
func procPath(pid int, name string) string {
	return "/proc/" + strconv.Itoa(pid) + "/" + name
}

// readBounded reads at most limit bytes of path; more is an error unless
// truncate is set (then the first limit bytes are returned).
func readBounded(path string, limit int64, truncate bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		if !truncate {
			return nil, fmt.Errorf("%s: %w", path, errTooLarge)
		}
		b = b[:limit]
	}
	return b, nil
}

// Status is the part of /proc/<pid>/status Lachesis reads.
type Status struct {
	// UID is the real uid: who the process runs for.
	UID uint32
	// AllRoot: the real, effective, saved and filesystem uids are all 0.
	AllRoot bool
	// PPID is the parent's pid.
	PPID int
	// VmHWMKB is the peak resident set size in kB; 0 where the status
	// has none (kernel threads, zombies).
	VmHWMKB int64
	// Exited: the process has ended and waits only to be reaped (State
	// Z, zombie, or X, dead, and no thread left but that one): its
	// memory, files and GPU contexts are released, its pid is all that is
	// left. A zombie main thread whose other threads run (it called
	// pthread_exit) is a live process, which may hold a GPU: not exited.
	Exited bool
}

// ReadStatus reads /proc/<pid>/status.
func ReadStatus(pid int) (Status, error) {
	b, err := readBounded(procPath(pid, "status"), maxProcFile, false)
	if err != nil {
		return Status{}, err
	}
	return ParseStatus(b)
}

// ParseStatus reads the text of /proc/<pid>/status: its Uid: and PPid:
// lines are required.
func ParseStatus(b []byte) (Status, error) {
	var st Status
	var haveUID, havePPID, zombie bool
	threads := 0
	for line := range bytes.Lines(b) {
		key, val, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		switch string(key) {
		case "Uid":
			f := strings.Fields(string(val))
			if len(f) == 0 {
				return Status{}, errors.New("status: empty Uid line")
			}
			uid, err := strconv.ParseUint(f[0], 10, 32)
			if err != nil {
				return Status{}, fmt.Errorf("status: Uid: %w", err)
			}
			st.UID, haveUID = uint32(uid), true
			st.AllRoot = len(f) == 4 && f[0] == "0" && f[1] == "0" && f[2] == "0" && f[3] == "0"
		case "PPid":
			ppid, err := strconv.Atoi(strings.TrimSpace(string(val)))
			if err != nil {
				return Status{}, fmt.Errorf("status: PPid: %w", err)
			}
			st.PPID, havePPID = ppid, true
		case "VmHWM":
			if f := strings.Fields(string(val)); len(f) > 0 {
				st.VmHWMKB, _ = strconv.ParseInt(f[0], 10, 64)
			}
		case "State":
			if f := strings.Fields(string(val)); len(f) > 0 {
				zombie = f[0] == "Z" || f[0] == "X"
			}
		case "Threads":
			threads, _ = strconv.Atoi(strings.TrimSpace(string(val)))
		}
	}
	st.Exited = zombie && threads <= 1
	if !haveUID || !havePPID {
		return Status{}, errors.New("status: no Uid or PPid line")
	}
	return st, nil
}

// Owner is the real uid of process pid (the kernel's word), false if it
// does not exist or has exited (a zombie holds nothing but its pid: a
// just-killed job's process is one until it is reaped).
func Owner(pid int) (uint32, bool) {
	st, err := ReadStatus(pid)
	if err != nil || st.Exited {
		return 0, false
	}
	return st.UID, true
}

// Stat is the part of /proc/<pid>/stat Lachesis reads.
type Stat struct {
	PPID int
	// UTime and STime are the user and system time, in clock ticks.
	UTime, STime int64
	// StartTime is when the process started, in clock ticks after boot:
	// with its pid, it names one process for the life of the host (a
	// reused pid has another).
	StartTime uint64
}

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := readBounded(procPath(pid, "stat"), maxProcFile, false)
	if err != nil {
		return Stat{}, err
	}
	st, err := ParseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return st, nil
}

// ParseStat reads the text of /proc/<pid>/stat.
func ParseStat(b []byte) (Stat, error) {
	// The command name (field 2) is in parentheses and may hold spaces or
	// parentheses itself: the fields proper start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, errors.New("malformed")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): ppid is field 4, utime 14, stime 15,
	// starttime 22.
	if len(f) < 20 {
		return Stat{}, errors.New("short")
	}
	var st Stat
	st.PPID, _ = strconv.Atoi(f[1])
	st.UTime, _ = strconv.ParseInt(f[11], 10, 64)
	st.STime, _ = strconv.ParseInt(f[12], 10, 64)
	st.StartTime, _ = strconv.ParseUint(f[19], 10, 64)
	return st, nil
}
