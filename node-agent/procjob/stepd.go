package procjob

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// maxAncestors bounds the walk from a process up to its slurmstepd.
const maxAncestors = 64

// stepdOf walks from pid (whose status st is already read) up its
// ancestors to the nearest slurmstepd that runs as root and returns its
// job id and pid (0, 0 if none). The binary is checked by /proc/<pid>/exe,
// not by the name or title a process gives itself: a user may name
// anything "slurmstepd", even a setuid program, but cannot make root run
// Slurm's own slurmstepd for them.
func stepdOf(pid int, st Status) (job uint32, stepPID int) {
	for seen := 1; pid > 1; seen++ {
		exe, _ := os.Readlink(procPath(pid, "exe"))
		// Debian installs it as slurmstepd-wlm.
		if strings.HasPrefix(filepath.Base(exe), "slurmstepd") && st.AllRoot {
			title, _ := readBounded(procPath(pid, "cmdline"), maxTitle, true)
			if id := stepdJobID(string(title)); id != 0 {
				return id, pid
			}
		}
		if pid = st.PPID; pid <= 1 || seen == maxAncestors {
			break
		}
		var err error
		if st, err = ReadStatus(pid); err != nil {
			break
		}
	}
	return 0, 0
}

// stepdJobID reads the job id from a slurmstepd's title, "slurmstepd:
// [1234.0]", "[1234.batch]" or "[1234.extern]" (cmdline may end in NULs
// and padding); 0 if it is not one.
func stepdJobID(cmdline string) uint32 {
	rest, ok := strings.CutPrefix(cmdline, "slurmstepd: [")
	if !ok {
		return 0
	}
	end := strings.IndexAny(rest, ".]")
	if end <= 0 {
		return 0
	}
	id, err := strconv.ParseUint(rest[:end], 10, 32)
	if err != nil {
		return 0
	}
	return uint32(id)
}

// mpsServerName is the binary of CUDA MPS's server, the process the
// device lists beside its clients (and charges their utilisation to).
const mpsServerName = "nvidia-cuda-mps-server"

// MPSServer says process pid runs CUDA MPS's server: /proc/<pid>/exe is
// a file of that name that root owns and only root may write (as the
// driver's package installs it), so a user's copy or renamed program is
// not one.
func MPSServer(pid int) bool {
	exe, err := os.Readlink(procPath(pid, "exe"))
	if err != nil || filepath.Base(exe) != mpsServerName {
		return false
	}
	fi, err := os.Stat(procPath(pid, "exe"))
	if err != nil || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == 0
}
