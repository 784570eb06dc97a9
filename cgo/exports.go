//go:build cgo

package main

// All of the core's C entry points, and nothing else: each converts C types
// on entry, recovers any panic into an error code, and calls internal/core
// (through host where the call reuses the pass buffers).

/*
#include <stdlib.h>
#include "lachesis_core.h"
*/
import "C"

import (
	"fmt"
	"runtime/debug"
	"time"
	"unsafe"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/core"
)

//export lachesis_init
func lachesis_init(cenv *C.lachesis_env_t, errbuf *C.char, errlen C.int) (rc C.int) {
	defer recoverInto(&rc, "lachesis_init")
	if cenv == nil || cenv.abi_version != C.LACHESIS_ABI_VERSION {
		writeErr(errbuf, errlen, errABI)
		return C.LACHESIS_EINVAL
	}
	env := core.Env{
		ConfigPath:  config.PathNextTo(C.GoString(cenv.slurm_conf)),
		AuthInfo:    C.GoString(cenv.auth_info),
		ClusterName: C.GoString(cenv.cluster_name),
		SlurmUID:    uint32(cenv.slurm_user_id),
		Reconfigure: cenv.reconfigure != 0,
	}
	if err := start(env, cLogSink{fn: cenv.log}); err != nil {
		writeErr(errbuf, errlen, err)
		return C.LACHESIS_ECONFIG
	}
	return C.LACHESIS_OK
}

//export lachesis_fini
func lachesis_fini() {
	defer recoverInto(nil, "lachesis_fini")
	stop()
}

//export lachesis_reconfigure
func lachesis_reconfigure(errbuf *C.char, errlen C.int) (rc C.int) {
	defer recoverInto(&rc, "lachesis_reconfigure")
	h := running()
	if h == nil {
		return C.LACHESIS_ENOTINIT
	}
	if err := h.core.Reconfigure(); err != nil {
		writeErr(errbuf, errlen, err)
		return C.LACHESIS_ECONFIG
	}
	applyLogLevel(h.core)
	return C.LACHESIS_OK
}

//export lachesis_cluster
func lachesis_cluster(nodes *C.lachesis_cluster_node_t, n C.int32_t, errbuf *C.char, errlen C.int) (rc C.int) {
	defer recoverInto(&rc, "lachesis_cluster")
	h := running()
	if h == nil {
		return C.LACHESIS_ENOTINIT
	}
	if n < 0 || n > maxClusterNodes || (n > 0 && nodes == nil) {
		writeErr(errbuf, errlen, fmt.Errorf("lachesis_cluster: %d nodes (0 to %d)", n, maxClusterNodes))
		return C.LACHESIS_EINVAL
	}
	if err := withClusterFromC(unsafe.Slice(nodes, int(n)), h.core.SetCluster); err != nil {
		writeErr(errbuf, errlen, err)
		return C.LACHESIS_ECONFIG
	}
	return C.LACHESIS_OK
}

//export lachesis_pass_interval
func lachesis_pass_interval() (secs C.int) {
	defer recoverInto(nil, "lachesis_pass_interval")
	secs = 30
	if h := running(); h != nil {
		secs = C.int(h.core.PassInterval().Seconds())
	}
	return secs
}

//export lachesis_pass
func lachesis_pass(now C.int64_t, jobs *C.lachesis_job_t, n C.int32_t, out *C.lachesis_prio_t) (rc C.int) {
	defer recoverInto(&rc, "lachesis_pass")
	h := running()
	if h == nil {
		return C.LACHESIS_ENOTINIT
	}
	if n < 0 || (n > 0 && (jobs == nil || out == nil)) {
		return C.LACHESIS_EINVAL
	}
	cjobs := unsafe.Slice(jobs, int(n))
	couts := unsafe.Slice(out, int(n))
	candidates := h.pass(int64(now), len(cjobs),
		func(i int) core.Snapshot { return snapshotFromC(&cjobs[i], int64(now)) },
		func(i int, d *core.Decision) { prioToC(d, &couts[i]) })
	return C.int(candidates)
}

//export lachesis_enqueue
func lachesis_enqueue(now C.int64_t, job *C.lachesis_job_t, out *C.lachesis_prio_t) (rc C.int) {
	defer recoverInto(&rc, "lachesis_enqueue")
	h := running()
	if h == nil {
		return C.LACHESIS_ENOTINIT
	}
	if job == nil || out == nil {
		return C.LACHESIS_EINVAL
	}
	s := snapshotFromC(job, int64(now))
	d := h.core.Enqueue(int64(now), &s)
	prioToC(&d, out)
	return C.LACHESIS_OK
}

//export lachesis_factors
func lachesis_factors(jobID C.uint32_t, out *C.lachesis_prio_t) (rc C.int) {
	defer recoverInto(&rc, "lachesis_factors")
	h := running()
	if h == nil {
		return C.LACHESIS_ENOTINIT
	}
	if out == nil {
		return C.LACHESIS_EINVAL
	}
	d, err := h.core.Decision(uint32(jobID))
	if err != nil {
		return C.LACHESIS_ENOTFOUND
	}
	prioToC(&d, out)
	return C.LACHESIS_OK
}

//export lachesis_preemptable
func lachesis_preemptable(preemptor, preemptee C.uint32_t) (rc C.int) {
	defer recoverInto(&rc, "lachesis_preemptable")
	h := running()
	if h == nil || !h.core.Preemptable(uint32(preemptor), uint32(preemptee)) {
		return 0
	}
	return 1
}

//export lachesis_preempting
func lachesis_preempting(jobID C.uint32_t, now C.int64_t) {
	defer recoverInto(nil, "lachesis_preempting")
	if h := running(); h != nil {
		h.core.Preempting(uint32(jobID), int64(now))
	}
}

//export lachesis_victim_order
func lachesis_victim_order(jobID, fallback C.uint32_t) (rc C.uint32_t) {
	// The answer is an order, not an error code: after a panic Slurm
	// orders this job by its priority, as without the core.
	defer func() {
		if r := recover(); r != nil {
			rc = fallback
			logger().Error("recovered from panic", "entry", "lachesis_victim_order", "panic", fmt.Sprint(r),
				"stack", string(debug.Stack()))
		}
	}()
	h := running()
	if h == nil {
		return fallback
	}
	return C.uint32_t(h.core.VictimOrder(uint32(jobID)))
}

//export lachesis_preemption_possible
func lachesis_preemption_possible() (rc C.int) {
	defer recoverInto(&rc, "lachesis_preemption_possible")
	h := running()
	if h == nil || !h.core.PreemptionPossible() {
		return 0
	}
	return 1
}

//export lachesis_size_job
func lachesis_size_job(job *C.lachesis_submit_t, nodes *C.lachesis_node_t, n C.int32_t, out *C.lachesis_sizing_t) (rc C.int) {
	defer recoverInto(&rc, "lachesis_size_job")
	return sizeJob(job, nodes, n, out)
}

// sizeJob is lachesis_size_job's work, also done by the sizing goroutine
// (sizer.go). It makes no cgo call: see sizer.go for why.
func sizeJob(job *C.lachesis_submit_t, nodes *C.lachesis_node_t, n C.int32_t, out *C.lachesis_sizing_t) C.int {
	h := running()
	if h == nil {
		return C.LACHESIS_ENOTINIT
	}
	if job == nil || out == nil || n < 0 || (n > 0 && nodes == nil) {
		return C.LACHESIS_EINVAL
	}
	d := h.core.SizeJob(submitFromC(job), nodesFromC(unsafe.Slice(nodes, int(n))))
	sizingToC(&d, out)
	// Told here, on the sizing goroutine, so that with placement off (the
	// default) the RPC thread never enters Go for it.
	if h.core.PlacementEnabled() {
		out.placement = 1
	}
	return C.LACHESIS_OK
}

//export lachesis_fallback
func lachesis_fallback(now C.int64_t, nodes *C.lachesis_node_state_t, nn C.int32_t, out *C.lachesis_shrink_t, max C.int32_t) (n C.int) {
	defer recoverInto(&n, "lachesis_fallback")
	h := running()
	if h == nil || out == nil || max <= 0 || nn < 0 || (nn > 0 && nodes == nil) {
		return 0
	}
	cnodes := unsafe.Slice(nodes, int(nn))
	dst := unsafe.Slice(out, int(max))
	return C.int(h.fallback(int64(now), len(cnodes),
		func(i int) core.NodeState { return nodeStateFromC(&cnodes[i]) },
		len(dst), func(i int, s *core.Shrink) { shrinkToC(s, &dst[i]) }))
}

//export lachesis_sizer_start
func lachesis_sizer_start(slots *C.lachesis_size_slot_t, n C.int32_t, askFd C.int) (rc C.int) {
	defer recoverInto(&rc, "lachesis_sizer_start")
	if slots == nil || n < 1 || n > maxSizerSlots || askFd < 0 {
		return C.LACHESIS_EINVAL
	}
	if err := startSizer(unsafe.Slice(slots, int(n)), int(askFd), sizeSlotJob); err != nil {
		logger().Error("cannot start the sizing goroutine", "err", err)
		return C.LACHESIS_EINVAL
	}
	return C.LACHESIS_OK
}

//export lachesis_sizer_stop
func lachesis_sizer_stop(waitMS C.int) (rc C.int) {
	defer recoverInto(&rc, "lachesis_sizer_stop")
	if stopSizer(time.Duration(waitMS) * time.Millisecond) {
		return 1
	}
	return 0
}

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
	d := h.core.PlaceJob(placeReqFromC(job), placeNodesFromC(nodes, n))
	placementToC(&d, out)
	return C.LACHESIS_OK
}
