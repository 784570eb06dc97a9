//go:build cgo

package main

/*
#include <string.h>
#include "lachesis_core.h"
*/
import "C"

import (
	"unicode/utf8"
	"unsafe"

	"github.com/lachesis-sched/lachesis/internal/util/printable"
	"github.com/lachesis-sched/lachesis/policy/gres"
	"github.com/lachesis-sched/lachesis/policy/synergy"
)

// maxSubmitString bounds what is copied of any user-controlled string: a
// huge comment must cost nothing.
const maxSubmitString = 8192

// It reads the bytes in Go, not with strnlen: a cgo call from the sizing
// goroutine would wake Go's monitor thread (sizer.go).
func boundedString(p *C.char) string {
	if p == nil {
		return ""
	}
	base := unsafe.Pointer(p)
	n := 0
	for n < maxSubmitString && *(*byte)(unsafe.Add(base, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(base), n))
}

func submitFromC(j *C.lachesis_submit_t) synergy.Request {
	return synergy.Request{
		UserID:      uint32(j.user_id),
		Name:        boundedString(j.name),
		Comment:     boundedString(j.comment),
		Partition:   boundedString(j.partition),
		CPUsPerTRES: boundedString(j.cpus_per_tres),
		MemPerTRES:  boundedString(j.mem_per_tres),
		CPUsPerTask: uint16(j.cpus_per_task),
		MemMB:       uint64(j.mem_mb),
		MemPerCPU:   j.mem_per_cpu != 0,
		Exclusive:   j.exclusive != 0,
		GPU:         gresRequestFromC(j.tres_per_job, j.tres_per_node, j.tres_per_socket, j.tres_per_task, j.min_nodes, j.num_tasks),
	}
}

// gresRequestFromC is a submitted job's GPU request, as both sizing
// (lachesis_submit_t) and placement (lachesis_place_req_t) receive it.
func gresRequestFromC(perJob, perNode, perSocket, perTask *C.char, minNodes, numTasks C.uint32_t) gres.Request {
	return gres.Request{
		PerJob:    boundedString(perJob),
		PerNode:   boundedString(perNode),
		PerSocket: boundedString(perSocket),
		PerTask:   boundedString(perTask),
		Nodes:     uint32(minNodes),
		Tasks:     uint32(numTasks),
	}
}

func nodesFromC(cn []C.lachesis_node_t) []synergy.Node {
	nodes := make([]synergy.Node, len(cn))
	for i := range cn {
		nodes[i] = synergy.Node{CPUs: int(cn[i].cpus), MemMB: uint64(cn[i].mem_mb), Gres: boundedString(cn[i].gres)}
	}
	return nodes
}

func sizingToC(d *synergy.Decision, out *C.lachesis_sizing_t) {
	*out = C.lachesis_sizing_t{}
	switch d.Action {
	case synergy.Set:
		out.action = C.LACHESIS_SIZE_SET
	case synergy.Reject:
		out.action = C.LACHESIS_SIZE_REJECT
	case synergy.ToShards:
		out.action = C.LACHESIS_SIZE_SHARDS
		out.shards = C.uint32_t(d.Shards)
	default:
		out.action = C.LACHESIS_SIZE_LEAVE
	}
	out.cpus_per_gpu = C.uint32_t(d.CPUsPerGPU)
	out.mem_mb_per_gpu = C.uint64_t(d.MemMBPerGPU)
	if d.ClearCPUsPerTask {
		out.clear_cpus_per_task = 1
	}
	if d.ClearMem {
		out.clear_mem = 1
	}
	copyCText(unsafe.Pointer(&out.reason[0]), len(out.reason), d.Reason)
	copyCText(unsafe.Pointer(&out.error[0]), len(out.error), d.Error)
}

// copyCString writes s, cut to fit and NUL-terminated, into a C char array.
func copyCString(dst unsafe.Pointer, size int, s string) {
	b := unsafe.Slice((*byte)(dst), size)
	n := copy(b[:size-1], s)
	b[n] = 0
}

// copyCText is copyCString for text the plugins print: into slurmctld's
// log (info, debug), a job's reason or a user's error. Reasons and errors
// quote what users chose (a model key, a gres string), so it goes without
// control and format characters (printable.String: no line of the user's
// own in slurmctld's log, no escape sequence on an admin's terminal), cut
// on a rune boundary.
func copyCText(dst unsafe.Pointer, size int, s string) {
	s = printable.String(s)
	if n := size - 1; len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	copyCString(dst, size, s)
}
