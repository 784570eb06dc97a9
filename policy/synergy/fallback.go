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

// ParseSizing reads Lachesis's marker from an admin comment: the last
// "[lachesis:" of the comment, which must be a whole sizing marker ending
// the comment or followed by "; " (the next reason). Only Lachesis writes
// brackets there: every user-chosen text in a reason has them dropped
// (reasontext.Field), and only an admin can set an AdminComment. A comment
// whose last marker is not a sizing one (e.g. the shrunk one) has none.
func ParseSizing(comment string) (Sizing, bool) {
	sz, _, ok := findSizing(comment)
	return sz, ok
}

// findSizing is ParseSizing that also returns where the marker lies.
func findSizing(comment string) (Sizing, [2]int, bool) {
	at := strings.LastIndex(comment, "[lachesis:")
	if at < 0 {
		return Sizing{}, [2]int{}, false
	}
	loc := markerRE.FindStringSubmatchIndex(comment[at:])
	if loc == nil || loc[0] != 0 {
		return Sizing{}, [2]int{}, false
	}
	end := at + loc[1]
	if rest := comment[end:]; rest != "" && !strings.HasPrefix(rest, "; ") {
		return Sizing{}, [2]int{}, false
	}
	n := make([]uint64, 4)
	for i := range n {
		v, err := strconv.ParseUint(comment[at+loc[2*i+2]:at+loc[2*i+3]], 10, 32)
		if err != nil {
			return Sizing{}, [2]int{}, false
		}
		n[i] = v
	}
	sz := Sizing{CPUs: int(n[0]), MemMB: n[1], ShareCPUs: int(n[2]), ShareMemMB: n[3]}
	return sz, [2]int{at, end}, true
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
	// Raise: the decision raises the job (Restore, numbers from its
	// profile and the nodes); otherwise it only lowers it (Fallback).
	Raise bool
}

// Fallback is the pass's start-time sizing (FitNow) of a job Lachesis
// sized that waits for resources: while some node has the GPUs it needs
// free but not its request, the job is held back; once start-time sizing
// stops waiting for its request (Config.Waits, given held, which the
// caller counts from the first pass that found it held back), it is
// lowered to the most such a node can spare, at least min(request, share)
// per GPU. holding reports that the job is held back now, whether or not
// it is lowered, so the caller can start its clock. The marker keeps the lowered request and the
// share, so a later pass may lower it again, never raise it. g is the
// job's GPUs per node.
func Fallback(cfg Config, comment string, g int, held time.Duration, nodes []NodeState) (sh Shrink, holding, ok bool) {
	sz, span, ok := findSizing(comment)
	if !ok || !sz.Enlarged() || g <= 0 {
		return Shrink{}, false, false
	}
	rs, ok := FitNow(sz, g, nodes)
	if !ok {
		return Shrink{}, false, false
	}
	for _, n := range nodes {
		if cfg.Waits(sz, g, n, held) {
			return Shrink{}, true, false
		}
	}
	// Only Lachesis's own trailing marker is rewritten (findSizing); what
	// follows it is the previous note, replaced by this one.
	note := describeResize(sz, rs) + fmt.Sprintf(", after %s held back with GPUs free", held.Round(time.Second))
	return Shrink{
		CPUsPerGPU:   rs.CPUsPerGPU,
		MemMBPerGPU:  rs.MemMBPerGPU,
		AdminComment: comment[:span[0]] + rs.Sizing.marker() + "; " + note,
	}, true, true
}
