package sim

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
)

// ErrNoMemStat means the platform does not report peak memory the way
// Linux's /proc does.
var ErrNoMemStat = errors.New("peak memory not available on this platform")

// PeakRSS is the process's peak resident set size in bytes (VmHWM in
// /proc/self/status).
func PeakRSS() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, ErrNoMemStat
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, ErrNoMemStat
			}
			return kb * 1024, nil
		}
	}
	return 0, ErrNoMemStat
}
