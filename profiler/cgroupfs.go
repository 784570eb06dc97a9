package profiler

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lachesis-sched/lachesis/node-agent/procjob"
)

// cgroupMount is one mounted cgroup hierarchy.
type cgroupMount struct {
	root  string // the hierarchy path mounted here ("/" unless in a namespace)
	point string
	v2    bool
	opts  []string // super options: a v1 hierarchy's controllers among them
}

// cgroupMounts reads the cgroup hierarchies from /proc/self/mountinfo.
func cgroupMounts() ([]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "36 35 98:0 /root /point opts [optional...] - fstype source superopts"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 || (b[0] != "cgroup" && b[0] != "cgroup2") {
			continue
		}
		out = append(out, cgroupMount{root: a[3], point: a[4], v2: b[0] == "cgroup2", opts: strings.Split(b[2], ",")})
	}
	return out, sc.Err()
}

// ownCgroup is the directory of this process's cgroup in the v1 hierarchy
// of controller, or in the v2 hierarchy when controller is "".
func ownCgroup(controller string) (dir string, mnt cgroupMount, err error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return "", mnt, err
	}
	found := false
	for _, m := range mounts {
		if (controller == "" && m.v2) || (controller != "" && !m.v2 && slices.Contains(m.opts, controller)) {
			mnt, found = m, true
			break
		}
	}
	if !found {
		return "", mnt, fmt.Errorf("%w: no %s hierarchy mounted", errNoCgroup, hierarchyName(controller))
	}
	cgs, err := procjob.ReadCgroups(os.Getpid())
	if err != nil {
		return "", mnt, err
	}
	for _, c := range cgs {
		if (controller == "" && c.V2()) || (controller != "" && slices.Contains(c.Controllers, controller)) {
			rel := c.Path
			if mnt.root != "/" {
				rel = strings.TrimPrefix(rel, mnt.root)
			}
			return filepath.Join(mnt.point, rel), mnt, nil
		}
	}
	return "", mnt, fmt.Errorf("%w: this process is in no %s cgroup", errNoCgroup, hierarchyName(controller))
}

func hierarchyName(controller string) string {
	if controller == "" {
		return "cgroup v2"
	}
	return "cgroup v1 " + controller
}

func readTrim(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

func writeFile(path, val string) error {
	// O_WRONLY without O_CREATE or O_TRUNC: cgroup files exist and take
	// one write each.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(val)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", val, path, err)
	}
	return nil
}
