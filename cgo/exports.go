//go:build cgo

package main

// All of the core's C entry points, and nothing else: each converts C types
// on entry, recovers any panic into an error code, and calls internal/core.

/*
#include <stdlib.h>
#include "lachesis_core.h"
*/
import "C"

import (
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
	c := running()
	if c == nil {
		return C.LACHESIS_ENOTINIT
	}
	if err := c.Reconfigure(); err != nil {
		writeErr(errbuf, errlen, err)
		return C.LACHESIS_ECONFIG
	}
	applyLogLevel(c)
	return C.LACHESIS_OK
}

//export lachesis_pass_interval
func lachesis_pass_interval() (secs C.int) {
	defer recoverInto(nil, "lachesis_pass_interval")
	secs = 30
	if c := running(); c != nil {
		secs = C.int(c.PassInterval().Seconds())
	}
	return secs
}

//export lachesis_pass
func lachesis_pass(now C.int64_t, jobs *C.lachesis_job_t, n C.int32_t, out *C.lachesis_prio_t) (rc C.int) {
	defer recoverInto(&rc, "lachesis_pass")
	c := running()
	if c == nil {
		return C.LACHESIS_ENOTINIT
	}
	if n < 0 || (n > 0 && (jobs == nil || out == nil)) {
		return C.LACHESIS_EINVAL
	}
	cjobs := unsafe.Slice(jobs, int(n))
	couts := unsafe.Slice(out, int(n))
	passMu.Lock()
	defer passMu.Unlock()
	snaps := passSnaps[:0]
	for i := range cjobs {
		snaps = append(snaps, snapshotFromC(&cjobs[i]))
	}
	if cap(passDecisions) < len(snaps) {
		passDecisions = make([]coreDecision, len(snaps))
	}
	decisions := passDecisions[:len(snaps)]
	candidates := c.Pass(int64(now), snaps, decisions)
	for i := range decisions {
		prioToC(&decisions[i], &couts[i])
	}
	passSnaps, passDecisions = snaps, decisions
	return C.int(candidates)
}

//export lachesis_place
func lachesis_place(now C.int64_t, job *C.lachesis_job_t, out *C.lachesis_prio_t) (rc C.int) {
	defer recoverInto(&rc, "lachesis_place")
	c := running()
	if c == nil {
		return C.LACHESIS_ENOTINIT
	}
	if job == nil || out == nil {
		return C.LACHESIS_EINVAL
	}
	s := snapshotFromC(job)
	d := c.Place(int64(now), &s)
	prioToC(&d, out)
	return C.LACHESIS_OK
}

//export lachesis_factors
func lachesis_factors(jobID C.uint32_t, out *C.lachesis_prio_t) (rc C.int) {
	defer recoverInto(&rc, "lachesis_factors")
	c := running()
	if c == nil {
		return C.LACHESIS_ENOTINIT
	}
	if out == nil {
		return C.LACHESIS_EINVAL
	}
	d, err := c.Decision(uint32(jobID))
	if err != nil {
		return C.LACHESIS_ENOTFOUND
	}
	prioToC(&d, out)
	return C.LACHESIS_OK
}

//export lachesis_preemptable
func lachesis_preemptable(preemptor, preemptee C.uint32_t) (rc C.int) {
	defer recoverInto(&rc, "lachesis_preemptable")
	c := running()
	if c == nil || !c.Preemptable(uint32(preemptor), uint32(preemptee)) {
		return 0
	}
	return 1
}

//export lachesis_size_job
func lachesis_size_job(job *C.lachesis_submit_t, nodes *C.lachesis_node_t, n C.int32_t, out *C.lachesis_sizing_t) (rc C.int) {
	defer recoverInto(&rc, "lachesis_size_job")
	c := running()
	if c == nil {
		return C.LACHESIS_ENOTINIT
	}
	if job == nil || out == nil || n < 0 || (n > 0 && nodes == nil) {
		return C.LACHESIS_EINVAL
	}
	d := c.SizeJob(submitFromC(job), nodesFromC(unsafe.Slice(nodes, int(n))))
	sizingToC(&d, out)
	return C.LACHESIS_OK
}

//export lachesis_fallback
func lachesis_fallback(nodes *C.lachesis_node_state_t, nn C.int32_t, out *C.lachesis_shrink_t, max C.int32_t) (n C.int) {
	defer recoverInto(&n, "lachesis_fallback")
	c := running()
	if c == nil || out == nil || max <= 0 || nn < 0 || (nn > 0 && nodes == nil) {
		return 0
	}
	shrinks := c.Fallback(time.Now().Unix(), nodeStatesFromC(unsafe.Slice(nodes, int(nn))), int(max))
	dst := unsafe.Slice(out, int(max))
	for i := range shrinks {
		shrinkToC(&shrinks[i], &dst[i])
	}
	return C.int(len(shrinks))
}
