package procjob

import (
	"slices"
	"strconv"
	"strings"
)

// Cgroup is one line of /proc/<pid>/cgroup.
type Cgroup struct {
	// Hierarchy is the hierarchy id; "0" with no controllers is v2.
	Hierarchy string
	// Controllers are a v1 hierarchy's controllers (and name=…); empty
	// for v2.
	Controllers []string
	Path        string
}

// V2 says the line is the cgroup v2 hierarchy's.
func (c Cgroup) V2() bool { return c.Hierarchy == "0" && len(c.Controllers) == 0 }

// ParseCgroups reads the text of /proc/<pid>/cgroup; malformed lines are
// skipped.
func ParseCgroups(text string) []Cgroup {
	var out []Cgroup
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			continue
		}
		var ctls []string
		if parts[1] != "" {
			ctls = strings.Split(parts[1], ",")
		}
		out = append(out, Cgroup{Hierarchy: parts[0], Controllers: ctls, Path: parts[2]})
	}
	return out
}

// ReadCgroups reads /proc/<pid>/cgroup.
func ReadCgroups(pid int) ([]Cgroup, error) {
	b, err := readBounded(procPath(pid, "cgroup"), maxProcFile, false)
	if err != nil {
		return nil, err
	}
	return ParseCgroups(string(b)), nil
}

// JobOfCgroupPath returns the job id that a cgroup path names (its
// job_<id> component: Slurm's layout in cgroup v1 and v2), 0 if none.
func JobOfCgroupPath(path string) uint32 {
	for _, c := range strings.Split(path, "/") {
		if v, ok := strings.CutPrefix(c, "job_"); ok {
			if id, err := strconv.ParseUint(v, 10, 32); err == nil && id > 0 {
				return uint32(id)
			}
		}
	}
	return 0
}

// JobsOfCgroups returns the distinct job ids the cgroups name, in order.
func JobsOfCgroups(cgs []Cgroup) []uint32 {
	var ids []uint32
	for _, c := range cgs {
		if id := JobOfCgroupPath(c.Path); id != 0 && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}
