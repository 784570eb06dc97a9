package cluster_test

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// effectiveYAML: type a is twice as fast as type b for every model
// (no per-model speed, no profile), effective service on or off.
func effectiveYAML(on bool) string {
	return fmt.Sprintf(`tiresias:
  effective_service: %v
gpu_types:
  a: {speed: 2.0}
  b: {speed: 1.0}
`, on)
}

// Two identical jobs, one pinned to a GPU of type a (--gpus=a:1), one to
// type b, a configured twice as fast. With effective service the job on a
// accrues attained service twice as fast, in the ledger (service per
// second of its run: exactly the configured speed) and in sprio's JOBSIZE
// column (growth over the same passes), and the speed used is logged once
// per job.
func TestJobOnFastTypeAccruesServiceAtItsSpeed(t *testing.T) {
	twinsOnTwoTypes(t, true, 2)
}

// The same jobs without effective service accrue plain GPU-seconds alike.
func TestWithoutEffectiveServiceBothTypesAccrueGPUSeconds(t *testing.T) {
	twinsOnTwoTypes(t, false, 1)
}

// twinsOnTwoTypes runs the twins and checks that the service of the one
// on a grows ratio times as fast as the other's.
func twinsOnTwoTypes(t *testing.T, effective bool, ratio float64) {
	e := startShapedCluster(t, shape{Nodes: 2, GPUs: 2, CPUs: 4, MemMB: 4000, GPUTypes: "b:1,a:1"}, effectiveYAML(effective))
	onA := e.submit("-J", "twin", "--gpus=a:1", "--wrap", "sleep 600")
	onB := e.submit("-J", "twin", "--gpus=b:1", "--wrap", "sleep 600")
	// Untyped request on the a node (lnode2): the node's type applies.
	untyped := e.submit("-J", "twin", "-w", "lnode2", "--gpus=1", "--wrap", "sleep 600")
	for _, id := range []uint32{onA, onB, untyped} {
		e.waitState(id, "RUNNING", 60*time.Second)
	}

	// Ledger: service per run-second of each job, from one pass.
	rate := map[uint32]float64{}
	e.eventually(30*time.Second, "the three jobs' runs in the ledger", func() (bool, string) {
		for _, id := range []uint32{onA, onB, untyped} {
			r, ok := e.ledgerRecord(id)
			if !ok || !r.RunOpen || r.RunSeconds < 3 {
				return false, fmt.Sprintf("job %d: %+v", id, r)
			}
			rate[id] = r.Total() / r.RunSeconds
		}
		return true, ""
	})
	if got := rate[onA] / rate[onB]; math.Abs(got-ratio) > 1e-9 || math.Abs(rate[onB]-1) > 1e-9 {
		t.Fatalf("ledger: service per run-second %v on a, %v on b (ratio %v); want ratio %v and 1 on b", rate[onA], rate[onB], got, ratio)
	}
	if rate[untyped] != rate[onA] {
		r, _ := e.ledgerRecord(untyped)
		t.Fatalf("ledger: untyped job on the a node accrues %v per second (%+v), the typed one %v; want the same", rate[untyped], r, rate[onA])
	}

	// sprio: JOBSIZE growth of both jobs between two readings.
	p1 := e.prio()
	var p2a, p2b int64
	// sprio truncates to whole GPU-seconds, so each growth is off by less
	// than 1: 40 on a keeps ratio 2 within [39/21, 41/19] (under 8%).
	e.eventually(90*time.Second, "40 GPU-s more service on the a job (sprio)", func() (bool, string) {
		p := e.prio()
		p2a, p2b = p[onA].Service, p[onB].Service
		return p2a-p1[onA].Service >= 40, fmt.Sprintf("a %d, b %d", p2a, p2b)
	})
	ga, gb := float64(p2a-p1[onA].Service), float64(p2b-p1[onB].Service)
	got := ga / gb
	t.Logf("sprio JOBSIZE growth: a %v, b %v, ratio %.3f (want %v); ledger rates a %v b %v", ga, gb, got, ratio, rate[onA], rate[onB])
	if math.Abs(got-ratio) > 0.1*ratio {
		t.Fatalf("sprio: JOBSIZE grew %v on a and %v on b, ratio %.3f; want %v within 10%%", ga, gb, got, ratio)
	}

	logged := e.logMatches(fmt.Sprintf(`effective service: run weighted by its GPU type's speed.*job_id=%d gpu_type=a model=twin speed=2 source=type_default`, onA)) &&
		e.logMatches(fmt.Sprintf(`job_id=%d gpu_type=b model=twin speed=1 source=type_default`, onB))
	if logged != effective {
		t.Fatalf("per-job speed logged: %v, want %v", logged, effective)
	}
}
