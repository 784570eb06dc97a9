//go:build cgo

package main

/*
#include "lachesis_core.h"
*/
import "C"

import (
	"unsafe"

	"github.com/lachesis-sched/lachesis/internal/controller/gres"
	"github.com/lachesis-sched/lachesis/internal/controller/placement"
)

//export lachesis_place_job
func lachesis_place_job(job *C.lachesis_place_req_t, nodes *C.lachesis_place_node_t, n C.int32_t, out *C.lachesis_place_t) (rc C.int) {
	defer recoverInto(&rc, "lachesis_place_job")
	h := running()
	if h == nil {
		return C.LACHESIS_ENOTINIT
	}
	if job == nil || out == nil || n < 0 || (n > 0 && nodes == nil) {
		return C.LACHESIS_EINVAL
	}
	cn := unsafe.Slice(nodes, int(n))
	pn := make([]placement.Node, len(cn))
	for i := range cn {
		pn[i] = placement.Node{CPUs: int(cn[i].cpus), MemMB: uint64(cn[i].mem_mb),
			Gres: boundedString(cn[i].gres), Features: boundedString(cn[i].features)}
	}
	d := h.core.PlaceJob(placeReqFromC(job), pn)
	*out = C.lachesis_place_t{}
	out.max_nodes = C.uint32_t(d.MaxNodes)
	copyCString(unsafe.Pointer(&out.prefer[0]), len(out.prefer), d.Prefer)
	copyCString(unsafe.Pointer(&out.reason[0]), len(out.reason), d.Reason)
	if len(d.Prefer) >= len(out.prefer) {
		out.prefer[0] = 0 // a cut expression would name a wrong feature
	}
	return C.LACHESIS_OK
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
		GPU: gres.Request{
			PerJob:    boundedString(j.tres_per_job),
			PerNode:   boundedString(j.tres_per_node),
			PerSocket: boundedString(j.tres_per_socket),
			PerTask:   boundedString(j.tres_per_task),
			Nodes:     uint32(j.min_nodes),
			Tasks:     uint32(j.num_tasks),
		},
	}
}
