package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/gpushare"
)

// relayPy reads lachesis-synth's "step N R it/s" lines on stdin and
// reports N to the node agent through etc/lachesis_progress.py, as a
// training loop would, so that a loaded machine's scheduling delays stay
// a small part of what the agent measures:
//   - only the newest count of what it read, as soon as it was printed:
//     it skips what it found waiting when it started (Python starting
//     late) and any older lines that piled up while it ran late; such a
//     count, seconds old, taken for a current one inflates the rate;
//   - its second report 10 s after its first, then one a second: the
//     agent seeds a job's rate with its first interval (a 30 s moving
//     average after it), so a few hundred ms of delay in a 1 s first
//     interval made a host measured at 37 it/s alone, 33 beside a
//     harmless guest, run at 31 throughout.
const relayPy = `import os, time, lachesis_progress
p = lachesis_progress.Reporter(interval=1)
rest, fresh, sent, last = b"", False, 0, 0.0
while True:
    chunk = os.read(0, 65536)
    if not chunk:
        break
    *lines, rest = (rest + chunk).split(b"\n")
    rest = rest[-4096:]
    if not fresh:
        fresh = True
        continue
    for line in reversed(lines):
        f = line.split()
        if len(f) >= 2 and f[0] == b"step" and f[1].isdigit():
            p.count = int(f[1])
            now = time.monotonic()
            if sent == 0 or now - last >= (10 if sent == 1 else 1):
                p.send()
                sent, last = sent + 1, now
            break
`

// Gandiva's introspection in slurmctld (issue 22 items 3 and 6): a
// guaranteed job and an opportunistic job share the loopback cluster's one
// fake GPU through gres/shard. The guaranteed job reports its progress
// (the synthetic training job's steps, through etc/lachesis_progress.py)
// and slows down beside the guest by what Gavel measured for the two
// models (the synthetic job's -pair-table). ResNet-18 beside LM runs at
// full speed: the guest is kept; beside a model at which it runs at half
// speed (below): the guest is requeued within a pass, the log says why, the pair is marked
// bad and the guest is kept off the host's node. Before introspection,
// nothing looked at the pair: the guest ran on beside a host at half
// speed.
//
// The kept guest is then held to the measured memory bound: beside a host
// that peaks at 60000 MiB of the fake GPU's 81920, with the default 10%
// headroom, it has 13728 MiB. At 4096 MiB it fits and is kept; grown to
// 20000 MiB (the synthetic job's -fake-gpu-mem-file) it is requeued within
// a pass, the log says why, and the host runs on untouched. Before the
// bound, shards fenced no memory: the guest kept growing beside its host.
//
// The controller's pair table is seeded from Gavel's files
// (sharing.pair_table), the synthetic jobs slow down by a copy of them
// with one more model, "Mystery", that slows ResNet-18 to half speed: a
// pair the controller cannot predict, so it packs it, measures it and
// reverts it. The reverted guest was submitted with its own exclusion
// (-x ghost1, a node of the cluster that never runs); Lachesis's node is
// added beside it, and lifted once the host has ended, leaving the
// user's list exactly. An opportunistic job Gavel predicts bad beside the
// running host (ResNet-50: 0.52 of alone) is kept off the host's node
// before it ever runs there, while a good one (LM) goes beside the host.
// Before the pair table was used in slurmctld, the predicted-bad guest
// took the free shard beside the host, and the revert replaced the
// user's ExcNodeList with the host's node for good.
func TestIntrospectionRevertsAHarmfulPacking(t *testing.T) {
	gavel := filepath.Join(repoRoot, "data", "gavel")
	// ghost1: a node that never runs, for a user's own ExcNodeList.
	e, fakeDir := startFakeGPUCluster(t, shape{Nodes: 1, GPUs: 1, ShardsPerGPU: 4, Cgroups: true},
		oppYAML(0)+"  pair_table: "+gavel+"\n", "",
		jobEndAndOpp(t, "NodeName=ghost1 NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=1 State=FUTURE"))
	writeMysteryPairTable(t, e)
	// GPU-bound: a 32 ms step (4 samples × 2 ms / knee 0.25) fed by one
	// loader worker that needs 8 ms a batch, so the step's speed is the
	// job's rate (about 31 it/s alone).
	synthCmd := func(name, model string, memMB int) string {
		return e.pairedSynthCmd(fakeDir, name, model, memMB, "-knee 0.25")
	}
	sbatch := func(args ...string) uint32 {
		t.Helper()
		return e.sbatchAsTestUser(t, args...)
	}
	// The job's model key (job_submit/synergy's: its comment's model=)
	// is the model the synthetic job runs as.
	host := func(name, model string, memMB int) uint32 {
		return sbatch("-J", name, "--comment", "model="+model, "-o", filepath.Join(e.work, name+".out"), "--gres=shard:3",
			"--wrap", synthCmd(name, model, memMB)+" | python3 -u relay.py")
	}
	guest := func(name, model string, memMB int, extra ...string) uint32 {
		return sbatch(append(append([]string{"-p", "opp", "-J", name, "--comment", "model=" + model, "-o", filepath.Join(e.work, name+".out"), "--gres=shard:1"},
			extra...), "--wrap", "exec "+synthCmd(name, model, memMB))...)
	}
	// The host has run alone long enough for a solo rate: its progress
	// reached the agent's metrics and the controller's AdminComment. It
	// is alone on the GPU, so it must never be reported shared (the
	// summary keeps the most sharers seen): a process of the pair that
	// just ended, dead but not yet reaped, once counted as use of no job.
	aloneLongEnough := func(id uint32) {
		e.eventually(120*time.Second, fmt.Sprintf("job %d's progress in its AdminComment", id), func() (bool, string) {
			c := e.show(id)["AdminComment"]
			if strings.Contains(c, "shared by up to") {
				t.Fatalf("job %d runs alone on its GPU but is reported shared: %s", id, c)
			}
			return regexp.MustCompile(`it/s, [3-9] samples\]|it/s, [1-9][0-9]+ samples\]`).MatchString(c), c
		})
	}
	line := func(format string, a ...any) *regexp.Regexp {
		return regexp.MustCompile(regexp.QuoteMeta(fmt.Sprintf(format, a...)))
	}

	// ResNet-18 beside LM: full speed (Gavel, V100), kept.
	mild := host("host_mild", "ResNet-18/bs64", 60000)
	e.waitState(mild, "RUNNING", 90*time.Second)
	aloneLongEnough(mild)
	kept := guest("guest_kept", "LM/bs80", 4096)
	e.waitState(kept, "RUNNING", 90*time.Second)
	keptLine := line("job %d kept: its neighbour job %d ran ", kept, mild)
	// Judged once the host's rate beside the guest has settled
	// (gpushare.IntroSettle after the guest came), then within passes.
	e.eventually(gpushare.IntroSettle+inPasses(180), "the pair judged and kept", func() (bool, string) {
		return keptLine.MatchString(e.c.ControllerLog()), e.c.ControllerLog()
	})
	t.Logf("%s", regexp.MustCompile(keptLine.String()+`.*`).FindString(e.c.ControllerLog()))
	fitsLine := line("job %d fits beside job %d on GPU GPU-fake-lnode1-0: its GPU memory 4096 MiB is within the room its neighbour leaves (13728 MiB)", kept, mild)
	e.eventually(60*time.Second, "the guest's memory judged within the room", func() (bool, string) {
		return fitsLine.MatchString(e.c.ControllerLog()), e.c.ControllerLog()
	})
	if j := e.jobs()[kept]; j.State != "RUNNING" || e.restarts(kept) != 0 {
		t.Fatalf("the kept guest: %+v, %d restarts", j, e.restarts(kept))
	}

	// The kept guest grows past the room its host leaves: requeued.
	grow := filepath.Join(e.work, "mem-guest_kept")
	if err := os.WriteFile(grow, []byte("20000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	grew := time.Now()
	memLine := line("job %d requeued: its GPU memory 20000 MiB on GPU GPU-fake-lnode1-0 exceeds the room its neighbour job %d leaves (13728 MiB)", kept, mild)
	e.eventually(90*time.Second, "the guest requeued for its memory", func() (bool, string) {
		return memLine.MatchString(e.c.ControllerLog()) && e.restarts(kept) == 1, e.c.ControllerLog()
	})
	t.Logf("%.1f s after the guest grew: %s", time.Since(grew).Seconds(), regexp.MustCompile(memLine.String()+`.*`).FindString(e.c.ControllerLog()))
	if j := e.jobs()[mild]; j.State != "RUNNING" || e.restarts(mild) != 0 {
		t.Fatalf("the host: %+v, %d restarts; want it running, untouched", j, e.restarts(mild))
	}
	e.cancel(kept)
	e.cancel(mild)
	e.eventually(60*time.Second, "the first pair to end", func() (bool, string) {
		j, k := e.jobs()[mild], e.jobs()[kept]
		return j.State != "RUNNING" && j.State != "COMPLETING" && k.State != "RUNNING" && k.State != "COMPLETING", fmt.Sprintf("%+v %+v", j, k)
	})

	// ResNet-18 beside Mystery: 0.5 of alone, which the controller's
	// table cannot predict; requeued, logged, kept off the node on top of
	// the user's own exclusion.
	slow := host("host_slow", "ResNet-18/bs64", 512)
	e.waitState(slow, "RUNNING", 90*time.Second)
	aloneLongEnough(slow)
	evicted := guest("guest_evicted", "Mystery", 512, "-x", "ghost1")
	e.waitState(evicted, "RUNNING", 90*time.Second)
	revertLine := regexp.MustCompile(fmt.Sprintf(`job %d requeued: its neighbour job %d ran \d+%% slower than alone \(max_slowdown 5%%\)`, evicted, slow))
	e.eventually(gpushare.IntroSettle+inPasses(180), "the guest requeued for its neighbour's slowdown", func() (bool, string) {
		return revertLine.MatchString(e.c.ControllerLog()) && e.restarts(evicted) == 1, e.c.ControllerLog()
	})
	// Its reason (squeue's %r, Slurm's BadConstraints once the list
	// leaves it no node) says which node Lachesis keeps it off and why.
	keptOffReason := line("kept off node lnode1: introspection requeued it from there: its neighbour job %d", slow)
	e.eventually(60*time.Second, "the guest kept off the host's node, beside the user's own exclusion, and its reason saying so", func() (bool, string) {
		f, r := e.show(evicted), e.jobs()[evicted].Reason
		return f["ExcNodeList"] == "ghost1,lnode1" && f["JobState"] == "PENDING" && keptOffReason.MatchString(r),
			fmt.Sprintf("%v %v, reason %q", f["ExcNodeList"], f["JobState"], r)
	})
	t.Logf("the kept-off guest's reason: %s", e.jobs()[evicted].Reason)
	if !line("job %d kept off node lnode1: introspection requeued it from there: its neighbour job %d (model resnet-18/bs64) ran ", evicted, slow).MatchString(e.c.ControllerLog()) {
		t.Fatalf("the log does not say why the guest is kept off lnode1:\n%s", e.c.ControllerLog())
	}
	t.Logf("%s", regexp.MustCompile(revertLine.String()+`.*`).FindString(e.c.ControllerLog()))
	if j := e.jobs()[slow]; j.State != "RUNNING" || e.restarts(slow) != 0 {
		t.Fatalf("the host: %+v, %d restarts; want it running, untouched", j, e.restarts(slow))
	}
	if !regexp.MustCompile(revertLine.String() + `.*host_model="?resnet-18/bs64"? guest_model="?mystery"?`).MatchString(e.c.ControllerLog()) {
		t.Fatalf("the revert line does not name the pair of models:\n%s", e.c.ControllerLog())
	}
	if n := len(revertLine.FindAllString(e.c.ControllerLog(), -1)); n != 1 {
		t.Fatalf("the revert is logged %d times; want once", n)
	}

	// Gavel predicts ResNet-50 at 0.52 of alone beside the host, LM at
	// full speed. Both wait (a begin time) while the pass judges them;
	// then one shard is free beside the host: LM takes it, ResNet-50 is
	// kept off the node.
	begin := "--begin=now+25"
	bad := guest("guest_predicted_bad", "ResNet-50/bs64", 512, begin)
	good := guest("guest_predicted_good", "LM/bs80", 512, begin)
	e.eventually(60*time.Second, "the predicted-bad guest kept off the host's node before it runs", func() (bool, string) {
		f := e.show(bad)
		return f["ExcNodeList"] == "lnode1" && f["JobState"] == "PENDING" && e.restarts(bad) == 0,
			fmt.Sprintf("%v %v, %d restarts", f["ExcNodeList"], f["JobState"], e.restarts(bad))
	})
	if !line("job %d kept off node lnode1: beside job %d (model resnet-18/bs64) the pair is predicted to run it at 52%% of its speed alone", bad, slow).MatchString(e.c.ControllerLog()) {
		t.Fatalf("the log does not say why the predicted-bad guest is kept off lnode1:\n%s", e.c.ControllerLog())
	}
	if f := e.show(good); f["ExcNodeList"] != "(null)" && f["ExcNodeList"] != "" {
		t.Fatalf("the predicted-good guest was kept off %q", f["ExcNodeList"])
	}
	e.waitState(good, "RUNNING", 120*time.Second)
	if f := e.show(bad); f["JobState"] != "PENDING" || e.restarts(bad) != 0 {
		t.Fatalf("the predicted-bad guest is %s, %d restarts; want PENDING, never run beside the host", f["JobState"], e.restarts(bad))
	}

	// slurmctld restarts (cleanly; its jobs and the ledger kept): Lachesis
	// still knows which nodes of both lists are its own, and keeps them
	// while the host runs.
	restarted := time.Now()
	if err := e.c.StopController(); err != nil {
		t.Fatal(err)
	}
	if err := e.c.RestartController(); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, "the exclusions restored from the ledger", func() (bool, string) {
		return line("exclusions restored from the ledger").MatchString(e.c.ControllerLog()), e.c.ControllerLog()
	})
	t.Logf("slurmctld stopped, restarted and its exclusions restored in %.1f s", time.Since(restarted).Seconds())
	if f, g := e.show(evicted), e.show(bad); f["ExcNodeList"] != "ghost1,lnode1" || g["ExcNodeList"] != "lnode1" {
		t.Fatalf("after the restart ExcNodeLists %q and %q; want ghost1,lnode1 and lnode1 kept while the host runs", f["ExcNodeList"], g["ExcNodeList"])
	}

	// The host ends: both exclusions are lifted, the reverted guest's
	// list is exactly its user's again, and it runs.
	e.cancel(slow)
	e.eventually(90*time.Second, "the reverted guest's ExcNodeList back to the user's own", func() (bool, string) {
		f := e.show(evicted)
		return f["ExcNodeList"] == "ghost1", f["ExcNodeList"]
	})
	e.eventually(90*time.Second, "the predicted-bad guest's exclusion lifted", func() (bool, string) {
		f := e.show(bad)
		return f["ExcNodeList"] == "(null)" || f["ExcNodeList"] == "", f["ExcNodeList"]
	})
	if !line("job %d may run on node lnode1 again", evicted).MatchString(e.c.ControllerLog()) {
		t.Fatalf("the lift is not logged:\n%s", e.c.ControllerLog())
	}
	lifted := time.Now()
	e.waitState(evicted, "RUNNING", 180*time.Second)
	t.Logf("the reverted guest ran %.1f s after its exclusion was lifted", time.Since(lifted).Seconds())
}
