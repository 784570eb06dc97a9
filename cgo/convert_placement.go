//go:build cgo

package main

/*
#include "lachesis_core.h"
*/
import "C"

import (
	"unsafe"

	"github.com/lachesis-sched/lachesis/policy/placement"
)

func placeNodesFromC(nodes *C.lachesis_place_node_t, n C.int32_t) []placement.Node {
	cn := unsafe.Slice(nodes, int(n))
	pn := make([]placement.Node, len(cn))
	for i := range cn {
		pn[i] = placement.Node{CPUs: int(cn[i].cpus), MemMB: uint64(cn[i].mem_mb),
			Gres: boundedString(cn[i].gres), Features: boundedString(cn[i].features)}
	}
	return pn
}

func placementToC(d *placement.Decision, out *C.lachesis_place_t) {
	*out = C.lachesis_place_t{}
	out.max_nodes = C.uint32_t(d.MaxNodes)
	copyCString(unsafe.Pointer(&out.prefer[0]), len(out.prefer), d.Prefer)
	copyCText(unsafe.Pointer(&out.reason[0]), len(out.reason), d.Reason)
	if len(d.Prefer) >= len(out.prefer) {
		out.prefer[0] = 0 // a cut expression would name a wrong feature
	}
}

func placeReqFromC(j *C.lachesis_place_req_t) placement.Request {
	return placement.Request{
		Name:        boundedString(j.name),
		Comment:     boundedString(j.comment),
		Partition:   boundedString(j.partition),
		MaxNodes:    uint32(j.max_nodes),
		Features:    boundedString(j.features),
		Prefer:      boundedString(j.prefer),
		ReqNodes:    boundedString(j.req_nodes),
		CPUsPerTRES: boundedString(j.cpus_per_tres),
		MemPerTRES:  boundedString(j.mem_per_tres),
		GPU:         gresRequestFromC(j.tres_per_job, j.tres_per_node, j.tres_per_socket, j.tres_per_task, j.min_nodes, j.num_tasks),
	}
}
