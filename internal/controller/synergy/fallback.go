package synergy

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// SizedMarker starts the machine-readable record of a sizing in a job's
// admin comment, e.g. "[lachesis:sized cpus=9 mem=64000 share_cpus=3
// share_mem=64000]". The pending-job fallback reads it back: slurmctld
// keeps the admin comment across restarts, so no other state is needed.
const SizedMarker = "[lachesis:sized"

// shrunkMarker replaces SizedMarker once a job has been shrunk, so it is
// shrunk at most once.
const shrunkMarker = "[lachesis:shrunk]"

var markerRE = regexp.MustCompile(`\[lachesis:sized cpus=(\d+) mem=(\d+) share_cpus=(\d+) share_mem=(\d+)\]`)

// Sizing is what the marker records, per GPU.
type Sizing struct {
	CPUs, ShareCPUs   int
	MemMB, ShareMemMB uint64
}

func (s Sizing) marker() string {
	return fmt.Sprintf("%s cpus=%d mem=%d share_cpus=%d share_mem=%d]", SizedMarker, s.CPUs, s.MemMB, s.ShareCPUs, s.ShareMemMB)
}

// Enlarged reports whether the job asks for more than its share.
func (s Sizing) Enlarged() bool { return s.CPUs > s.ShareCPUs || s.MemMB > s.ShareMemMB }

// ParseSizing reads the marker from an admin comment.
func ParseSizing(comment string) (Sizing, bool) {
	m := markerRE.FindStringSubmatch(comment)
	if m == nil {
		return Sizing{}, false
	}
	n := make([]uint64, 4)
	for i := range n {
		v, err := strconv.ParseUint(m[i+1], 10, 32)
		if err != nil {
			return Sizing{}, false
		}
		n[i] = v
	}
	return Sizing{CPUs: int(n[0]), MemMB: n[1], ShareCPUs: int(n[2]), ShareMemMB: n[3]}, true
}

// NodeState is one node's capacity and current use.
type NodeState struct {
	CPUs, AllocCPUs, GPUs, AllocGPUs int
	MemMB, AllocMemMB                uint64
	Usable                           bool
}

// Shrink is the fallback's decision for one pending job.
type Shrink struct {
	CPUsPerGPU   int
	MemMBPerGPU  uint64
	AdminComment string
}

// Fallback is Synergy-TUNE's fallback adapted to Slurm: a job Lachesis
// enlarged beyond its GPU-proportional share that has waited for resources
// at least cfg.FallbackAfter, while some node has the GPUs it needs free
// but not the enlarged CPUs or memory, and would fit there at its share,
// is shrunk to the share. g is the job's GPUs per node.
func Fallback(cfg Config, comment string, g int, waited time.Duration, nodes []NodeState) (Shrink, bool) {
	sz, ok := ParseSizing(comment)
	if !ok || !sz.Enlarged() || waited < cfg.FallbackAfter || g <= 0 {
		return Shrink{}, false
	}
	cpus, mem := min(sz.CPUs, sz.ShareCPUs), min(sz.MemMB, sz.ShareMemMB)
	for _, n := range nodes {
		freeCPUs, freeMem := n.CPUs-n.AllocCPUs, n.MemMB-min(n.AllocMemMB, n.MemMB)
		if !n.Usable || n.GPUs-n.AllocGPUs < g {
			continue
		}
		fitsEnlarged := freeCPUs >= g*sz.CPUs && freeMem >= uint64(g)*sz.MemMB
		fitsShare := freeCPUs >= g*cpus && freeMem >= uint64(g)*mem
		if fitsEnlarged || !fitsShare {
			continue
		}
		note := fmt.Sprintf("lachesis: shrunk to the proportional share (%d CPUs, %d MB per GPU) after %s waiting: %d CPUs, %d MB per GPU fit no node while its GPUs were free",
			cpus, mem, waited.Round(time.Second), sz.CPUs, sz.MemMB)
		return Shrink{
			CPUsPerGPU:   cpus,
			MemMBPerGPU:  mem,
			AdminComment: strings.Replace(comment, sz.marker(), shrunkMarker, 1) + "; " + note,
		}, true
	}
	return Shrink{}, false
}
