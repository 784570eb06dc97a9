package procjob

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
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

// cgroupMount is where one cgroup hierarchy is mounted: its directory,
// and the hierarchy's path that directory shows (not "/" when only a
// subtree is mounted, as in a container).
type cgroupMount struct {
	// controllers: a v1 hierarchy's (super options naming a controller or
	// name=…); nil for v2.
	controllers []string
	v2          bool
	dir, root   string
}

// maxMountinfo bounds what is read of /proc/self/mountinfo: the cgroup
// hierarchies are mounted early, so a host with more mounts than this
// loses only later ones.
const maxMountinfo = 1 << 20

// parseMountinfo reads the cgroup mounts of /proc/self/mountinfo's text.
func parseMountinfo(text string) []cgroupMount {
	var out []cgroupMount
	for _, line := range strings.Split(text, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		m := cgroupMount{root: unescapeMount(f[3]), dir: unescapeMount(f[4])}
		switch g[0] {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				if o != "rw" && o != "ro" && !strings.Contains(o, "=") || strings.HasPrefix(o, "name=") {
					m.controllers = append(m.controllers, o)
				}
			}
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountOf is where cgroup line c's hierarchy is mounted (false if
// nowhere this process sees).
func mountOf(mounts []cgroupMount, c Cgroup) (cgroupMount, bool) {
	for _, m := range mounts {
		if c.V2() {
			if m.v2 {
				return m, true
			}
			continue
		}
		if m.v2 || len(c.Controllers) == 0 {
			continue
		}
		all := true
		for _, ctl := range c.Controllers {
			all = all && slices.Contains(m.controllers, ctl)
		}
		if all {
			return m, true
		}
	}
	return cgroupMount{}, false
}

// ownerOf is the uid that owns a file (stat, no link followed).
type ownerOf func(path string) (uint32, bool)

func statOwner(path string) (uint32, bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

// rootJobOfCgroups is the job of the job_<id> cgroups among cgs whose
// directory root owns (Slurm makes a job's cgroup as root: in v1
// .../uid_<uid>/job_<id>, in v2 .../job_<id>; only the step's cgroups
// below it are the user's), 0 if none; false when they name two jobs.
// A user may make a cgroup named job_<id> only where cgroups are
// delegated to them, and it is theirs, not root's; nor can they move a
// process out of their job's cgroup, whose parents root owns.
func rootJobOfCgroups(cgs []Cgroup, mounts []cgroupMount, owner ownerOf) (uint32, bool) {
	var job uint32
	for _, c := range cgs {
		m, ok := mountOf(mounts, c)
		if !ok {
			continue
		}
		rel, ok := strings.CutPrefix(c.Path, strings.TrimSuffix(m.root, "/"))
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
			continue // outside the mounted subtree
		}
		dir := m.dir
		for _, comp := range strings.Split(strings.Trim(rel, "/"), "/") {
			if comp == "" || comp == "." || comp == ".." {
				break
			}
			dir += "/" + comp
			id := JobOfCgroupPath(comp)
			if id == 0 {
				continue
			}
			if uid, ok := owner(dir); !ok || uid != 0 {
				continue
			}
			if job != 0 && job != id {
				return 0, false
			}
			job = id
			break
		}
	}
	return job, true
}

// readMounts reads this process's cgroup mounts.
func readMounts() []cgroupMount {
	b, err := readBounded("/proc/self/mountinfo", maxMountinfo, true)
	if err != nil {
		return nil
	}
	return parseMountinfo(string(b))
}
