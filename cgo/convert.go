//go:build cgo

package main

/*
#include <stdlib.h>
#include <string.h>
#include "lachesis_core.h"
*/
import "C"

import (
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/lachesis-sched/lachesis/internal/controller/core"
	"github.com/lachesis-sched/lachesis/policy/gres"
	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/policy/synergy"
)

// sizedMarker is core.SizedMarker as a C string, made once.
var sizedMarker = C.CString(core.SizedMarker)

var semicolon = C.CString(";")

// servicePrefix is core.MarkerPrefix as a C string, made once.
var servicePrefix = C.CString(core.MarkerPrefix)

// asksForGPUShare reports whether any of the job's request strings asks
// for a share of a GPU (gres.AsksForGPUShare: gres/shard or gres/mps).
// Slurm's strings are read in place, nothing copied, since the pass asks
// it of every job without GPUs; the rule keeps no reference to them.
func asksForGPUShare(j *C.lachesis_job_t) bool {
	for _, p := range []*C.char{j.tres_per_job, j.tres_per_node, j.tres_per_socket, j.tres_per_task} {
		if p != nil && gres.AsksForGPUShare(unsafe.String((*byte)(unsafe.Pointer(p)), int(C.strlen(p)))) {
			return true
		}
	}
	return false
}

// markerFromC copies Lachesis's part of a SystemComment: from the prefix
// to the next ';', bounded, so an admin's long comment costs nothing.
func markerFromC(sc *C.char) string {
	if sc == nil {
		return ""
	}
	at := C.strstr(sc, servicePrefix)
	if at == nil {
		return ""
	}
	n := int(C.strcspn(at, semicolon))
	if n > core.MarkerMax {
		return "" // not one of ours
	}
	return C.GoStringN(at, C.int(n))
}

// accountNames interns account names across passes and placements;
// partitionNames the same for partition names.
var accountNames, partitionNames core.AccountNames

// accountFromC reads at most priority.MaxAccountName bytes of an account
// name and interns them: no allocation for names seen before.
func accountFromC(p *C.char) string { return internFromC(&accountNames, p) }

// internFromC reads at most priority.MaxAccountName bytes of a C string
// into names.
func internFromC(names *core.AccountNames, p *C.char) string {
	if p == nil {
		return ""
	}
	n := int(C.strnlen(p, C.size_t(priority.MaxAccountName)))
	return names.Intern(unsafe.Slice((*byte)(unsafe.Pointer(p)), n))
}

func nodeStateFromC(n *C.lachesis_node_state_t) core.NodeState {
	return core.NodeState{
		CPUs: int(n.cpus), AllocCPUs: int(n.alloc_cpus),
		GPUs: int(n.gpus), AllocGPUs: int(n.alloc_gpus),
		MemMB: uint64(n.mem_mb), AllocMemMB: uint64(n.alloc_mem_mb),
		Usable: n.usable != 0,
	}
}

func shrinkToC(s *core.Shrink, out *C.lachesis_shrink_t) {
	*out = C.lachesis_shrink_t{job_id: C.uint32_t(s.JobID), cpus_per_gpu: C.uint32_t(s.CPUsPerGPU), mem_mb_per_gpu: C.uint64_t(s.MemMBPerGPU)}
	if s.Raise {
		out.raise = 1
	}
	copyCString(unsafe.Pointer(&out.admin_comment[0]), len(out.admin_comment), s.AdminComment)
	copyCString(unsafe.Pointer(&out.cpus_per_tres[0]), len(out.cpus_per_tres), s.CPUsPerTRES)
	copyCString(unsafe.Pointer(&out.mem_per_tres[0]), len(out.mem_per_tres), s.MemPerTRES)
}

// The core's bound on the request strings a shrink carries is the
// header's (a constant index out of range fails the build if they drift).
var _ = [1]int{}[C.LACHESIS_SHRINK_TRES_MAX-core.ShrinkTRESMax]

// maxGPUTypeName bounds a GPU type read from Slurm (GRES type names are
// short; a longer one is not a type Lachesis was told a speed for).
const maxGPUTypeName = 64

// cRun is a job's C record seen as core.RunInfo: the core reads the GPU
// type and model key only when a run opens under effective service, so
// a pass copies no string for them. Valid only during the entry point
// call that received the record, which is all the core keeps it for.
type cRun C.lachesis_job_t

// GPUType implements core.RunInfo: lower case, as lachesis.yaml's types.
func (r *cRun) GPUType() string {
	if r.gpu_type == nil {
		return ""
	}
	n := int(C.strnlen(r.gpu_type, C.size_t(maxGPUTypeName+1)))
	if n > maxGPUTypeName {
		return ""
	}
	return strings.ToLower(C.GoStringN(r.gpu_type, C.int(n)))
}

// ModelKey implements core.RunInfo: job_submit/synergy's key (the
// comment's model=..., else the name), lower case as placement's table.
func (r *cRun) ModelKey() string {
	req := synergy.Request{Name: boundedString(r.name), Comment: boundedString(r.comment)}
	return strings.ToLower(req.ModelKey())
}

// core.EndState's values are the header's LACHESIS_END_* (a constant
// index out of range fails the build if they drift).
var _ = [1]int{}[C.LACHESIS_END_COMPLETED-int(core.EndCompleted)+
	C.LACHESIS_END_CANCELLED-int(core.EndCancelled)+
	C.LACHESIS_END_FAILED-int(core.EndFailed)]

// snapshotFromC copies one job; now is the call's, for Deferred.
func snapshotFromC(j *C.lachesis_job_t, now int64) core.Snapshot {
	s := core.Snapshot{
		ID:    uint32(j.job_id),
		State: core.JobState(j.state),
		Held:  j.held != 0,
		// slurmctld sets EligibleTime (begin_time) once nothing but
		// resources keeps the job, and clears it on a hold.
		Deferred: j.state == C.LACHESIS_PENDING && j.held == 0 &&
			(j.begin_time == 0 || int64(j.begin_time) > now),
		GPUs:        uint32(j.gpus),
		Nice:        int32(j.nice),
		SubmitTime:  int64(j.submit_time),
		BeginTime:   int64(j.begin_time),
		StartTime:   int64(j.start_time),
		EndTime:     int64(j.end_time),
		SuspendTime: int64(j.suspend_time),
		PreSusTime:  int64(j.pre_sus_time),
		PartFactor:  float64(j.part_factor),
		QOSFactor:   float64(j.qos_factor),
		CPUs:        uint32(j.cpus),
		NodeCPUs:    uint32(j.node_cpus),
		NodeGPUs:    uint32(j.node_gpus),
		User:        uint32(j.user_id),
	}
	if j.state == C.LACHESIS_PENDING && j.admin_comment != nil &&
		C.strstr(j.admin_comment, sizedMarker) != nil {
		// Only jobs Lachesis sized can need start-time sizing: copy
		// their comment, nobody else's. The plugin gives it only for
		// jobs that wait for resources or were requeued.
		s.WaitsForResources = j.waits_for_resources != 0
		s.AdminComment = boundedString(j.admin_comment)
		s.CPUsPerTRES = boundedString(j.cpus_per_tres)
		s.MemPerTRES = boundedString(j.mem_per_tres)
		req := synergy.Request{Name: boundedString(j.name), Comment: boundedString(j.comment)}
		s.SizingModel = req.ModelKey()
	}
	s.Marker = markerFromC(j.system_comment)
	s.Account = accountFromC(j.account)
	s.AccountShares = uint32(j.account_shares)
	s.Partition = internFromC(&partitionNames, j.partition)
	s.PartitionTier = uint32(j.partition_tier)
	s.ArrayJobID = uint32(j.array_job_id)
	s.ArrayThrottle = uint32(j.array_throttle)
	s.PreemptTime = int64(j.preempt_time)
	s.RequeueAllowed = j.requeue_allowed != 0
	s.EndState = core.EndState(j.end_state)
	s.FirstNode, s.NodeCount = int32(j.first_node), uint32(j.node_count)
	if j.nodes != nil && j.node_count > 1 && j.node_count <= maxClusterNodes {
		// The plugin's buffer, valid during the pass (Snapshot.Nodes):
		// no copy.
		s.Nodes = unsafe.Slice((*int32)(unsafe.Pointer(j.nodes)), int(j.node_count))
	}
	if j.state != C.LACHESIS_PENDING {
		s.Run = (*cRun)(j) // a pointer in an interface: no allocation
	} else if j.name != nil || j.comment != nil {
		s.Asked = (*cRun)(j)
	}
	s.GresRequest.Nodes, s.GresRequest.Tasks = uint32(j.num_nodes), uint32(j.num_tasks)
	s.GPUShare = (s.GPUs == 0 || s.GPUs == core.UnknownGPUs) && asksForGPUShare(j)
	if s.GPUs == core.UnknownGPUs {
		// Only copied when needed: most sites track gres/gpu as a TRES.
		s.GresRequest = gres.Request{
			PerJob:    C.GoString(j.tres_per_job),
			PerNode:   C.GoString(j.tres_per_node),
			PerSocket: C.GoString(j.tres_per_socket),
			PerTask:   C.GoString(j.tres_per_task),
			Nodes:     uint32(j.num_nodes),
			Tasks:     uint32(j.num_tasks),
		}
	}
	return s
}

func prioToC(d *core.Decision, out *C.lachesis_prio_t) {
	*out = C.lachesis_prio_t{
		priority:      C.uint32_t(d.Priority),
		queue:         C.int32_t(d.Queue),
		service:       C.double(d.Service),
		queue_service: C.double(d.QueueService),
		gittins:       C.double(d.Factors.Gittins),
		w_tiresias:    C.double(d.WeightedTiresias),
		w_age:         C.double(d.WeightedAge),
		w_partition:   C.double(d.WeightedPartition),
		w_qos:         C.double(d.WeightedQOS),
		nice:          C.int32_t(d.Factors.Nice),
		fairshare:     C.double(d.Factors.FairShare),
	}
	if d.Marker != "" {
		copyCString(unsafe.Pointer(&out.marker[0]), len(out.marker), d.Marker)
	}
	if d.Blocked != "" {
		copyCText(unsafe.Pointer(&out.blocked[0]), len(out.blocked), d.Blocked)
	}
	if d.GPUUse != "" && len(d.GPUUse) < len(out.usage) {
		// Whole or not at all: a cut segment would lose its ']'.
		copyCString(unsafe.Pointer(&out.usage[0]), len(out.usage), d.GPUUse)
	}
	if d.Quota != "" && len(d.Quota) < len(out.quota) {
		copyCString(unsafe.Pointer(&out.quota[0]), len(out.quota), d.Quota)
	}
}

// writeErr copies err's message into the caller's buffer, NUL-terminated.
func writeErr(buf *C.char, n C.int, err error) {
	if buf == nil || n <= 0 {
		return
	}
	copyCText(unsafe.Pointer(buf), int(n), err.Error())
}

// recoverInto turns a panic into LACHESIS_EPANIC and a log line: a bug in
// Lachesis must never take slurmctld down.
func recoverInto(rc *C.int, where string) {
	r := recover()
	if r == nil {
		return
	}
	if rc != nil {
		*rc = C.LACHESIS_EPANIC
	}
	logger().Error("recovered from panic", "entry", where, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
}

// reasonPrefixC is the header's LACHESIS_REASON_PREFIX, which must be
// reasontext.WaitingPrefix (convert_test.go).
func reasonPrefixC() string { return C.LACHESIS_REASON_PREFIX }

// usagePrefixC is LACHESIS_USAGE_PREFIX, for the test that it is
// gpushare.GPUUsePrefix.
func usagePrefixC() string { return C.LACHESIS_USAGE_PREFIX }

// quotaPrefixC is LACHESIS_QUOTA_PREFIX, for the test that it is
// core.QuotaSegmentPrefix.
func quotaPrefixC() string { return C.LACHESIS_QUOTA_PREFIX }

// quotaBufC is the size of lachesis_prio_t.quota.
func quotaBufC() int {
	var out C.lachesis_prio_t
	return len(out.quota)
}

// usageBufC is the size of lachesis_prio_t.usage.
func usageBufC() int {
	var out C.lachesis_prio_t
	return len(out.usage)
}

// maxClusterNodes bounds the node table lachesis_cluster reads.
const maxClusterNodes = 65536

// Slurm's node table is sent before every pass: clusterBuf and the
// interned names make the common pass (the same nodes) allocate nothing.
var (
	clusterMu  sync.Mutex
	clusterBuf []core.ClusterNode
	nodeNames  core.AccountNames
)

// withClusterFromC hands f Slurm's node table as Go values (names read to
// one byte past core.MaxNodeNameLen, so a longer one is refused, not
// cut); the slice is reused, so f must not keep it.
func withClusterFromC(nodes []C.lachesis_cluster_node_t, f func([]core.ClusterNode) error) error {
	clusterMu.Lock()
	defer clusterMu.Unlock()
	clusterBuf = slices.Grow(clusterBuf[:0], len(nodes))[:len(nodes)]
	for i := range nodes {
		clusterBuf[i] = core.ClusterNode{GPUs: int(min(nodes[i].gpus, 1<<16)), Index: int32(nodes[i].index)}
		if p := nodes[i].name; p != nil {
			n := int(C.strnlen(p, C.size_t(core.MaxNodeNameLen+1)))
			if n > core.MaxNodeNameLen {
				clusterBuf[i].Name = C.GoStringN(p, C.int(n)) // refused by SetCluster
				continue
			}
			clusterBuf[i].Name = nodeNames.Intern(unsafe.Slice((*byte)(unsafe.Pointer(p)), n))
		}
	}
	return f(clusterBuf)
}
