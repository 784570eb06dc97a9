package gpushare

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/util/reasontext"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

// A waiting guest kept off a node says so in its reason (squeue's %R),
// naming the node and the host beside which it would run badly; the text
// is the same string from pass to pass while nothing changes, and the part
// goes once the host has ended. A guest kept off nothing keeps the plain
// reason.
func TestAWaitingGuestsReasonNamesTheNodeItIsKeptOff(t *testing.T) {
	var buf bytes.Buffer
	c := seededCore(t, &buf)
	defer c.Close()
	sj := newFakeSlurm()
	host := hostOn(1, "resnet-18/bs64")
	bad := waitingGuestJob(2, mallory, "ResNet-50/bs64")
	good := waitingGuestJob(3, mallory, "lm/bs80")
	judgeBesideHost(c, host, bad, good) // bad kept off n1
	drain(t, c, sj)
	d := pass(c, 1020, host, bad, good)
	plain := reasontext.WaitingPrefix + "opportunistic: waits its turn by attained service, evicted first; guaranteed from "
	want := "; kept off node n1: beside job 1 (model resnet-18/bs64) the pa"
	if r := d[1].Reason; !strings.HasPrefix(r, reasontext.WaitingPrefix+"opportunistic (guaranteed from ") || !strings.Contains(r, want) || len(r) > maxGuestReason {
		t.Fatalf("kept-off guest's reason %q (%d bytes), want its upgrade time and %q, within %d bytes", r, len(r), want, maxGuestReason)
	}
	if !strings.HasPrefix(d[2].Reason, plain) || strings.Contains(d[2].Reason, "kept off") {
		t.Fatalf("guest kept off nothing: reason %q, want the plain one", d[2].Reason)
	}
	again := pass(c, 1030, host, bad, good)
	if again[1].Reason != d[1].Reason || unsafe.StringData(again[1].Reason) != unsafe.StringData(d[1].Reason) {
		t.Fatalf("unchanged reason made anew: %q", again[1].Reason)
	}
	pass(c, 1040, bad, good) // the host has ended: the node is lifted
	drain(t, c, sj)
	if d := pass(c, 1050, bad, good); !strings.HasPrefix(d[0].Reason, plain) || strings.Contains(d[0].Reason, "kept off") {
		t.Fatalf("after the host ended the reason is %q, want the plain one", d[0].Reason)
	}
}

// A reverted guest that Slurm holds because its exclusion leaves it no node
// (BadConstraints, priority 0) is not ranked, but still gets a reason: the
// node it is kept off and why.
func TestAHeldGuestsReasonSaysWhichExclusionHoldsIt(t *testing.T) {
	var buf bytes.Buffer
	c := introCore(t, &buf)
	defer c.Close()
	sj := newFakeSlurm()
	revertOnce(t, c, sj)
	host := shardJob(1, owner, "gpu", "resnet")
	held := waitingGuestJob(2, mallory, "lstm")
	held.Held = true
	d := pass(c, 1100, host, held)
	want := reasontext.WaitingPrefix + "opportunistic; kept off node n1: introspection requeued it from there: its neighbour job 1 (model resnet)"
	if !strings.HasPrefix(d[1].Reason, want) || len(d[1].Reason) > maxGuestReason {
		t.Fatalf("held guest's reason %q, want it to start %q, within %d bytes", d[1].Reason, want, maxGuestReason)
	}
	other := pending(3, 1, 900)
	other.Held = true
	if d := pass(c, 1110, host, held, other); d[2].Reason != "" {
		t.Fatalf("a job held for no exclusion of Lachesis's got reason %q", d[2].Reason)
	}
}

// The reason stays within what the plugin copies, says how many more nodes
// there are, and carries no control character or bracket of a model key a
// user chose.
func TestAKeptOffReasonIsBoundedAndClean(t *testing.T) {
	why := "beside job 7 (model " + strings.Repeat("x", 40) + "\n[lachesis:sized cpus=1]" + strings.Repeat("y", 200) + ") the pair is predicted"
	r := keptOffReason(1000, 300, false, "node17", 3, why)
	if len(r) > maxGuestReason || strings.ContainsAny(r, "\n[]") {
		t.Fatalf("reason %q (%d bytes): want at most %d, no newline or bracket", r, len(r), maxGuestReason)
	}
	if !strings.Contains(r, "(guaranteed from ") || !strings.Contains(r, "; kept off node node17 (and 3 more): beside job 7") {
		t.Fatalf("reason %q lacks the upgrade time or the node and count", r)
	}
	if h := keptOffReason(1000, 300, true, "n1", 0, "w"); strings.Contains(h, "guaranteed") {
		t.Fatalf("held guest's reason %q names an upgrade time its ranking will not reach", h)
	}
}

// oppConfig is testConfig with the opportunistic class on partition "opp",
// upgrading after 300 s of waiting.
func oppConfig(db string) config.Config {
	c := testConfig(db)
	c.Sharing = config.Sharing{OpportunisticPartition: "opp", Rules: sharingRules(0)}
	c.Sharing.Rules.PromoteAfter = 300
	c.Tiresias.Opportunistic = priority.Opportunistic{Enabled: true, Rules: c.Sharing.Rules}
	return c
}

func inClassPartition(s Job, partition string) Job {
	s.Partition = partition
	return s
}

func TestWaitingOpportunisticJobSaysWhyAndWhenItIsUpgraded(t *testing.T) {
	c := openCoreWith(t, oppConfig(filepath.Join(t.TempDir(), "l.db")))
	defer c.Close()
	d := pass(c, 1000, inClassPartition(pending(1, 1, 900), "opp"), inClassPartition(pending(2, 1, 900), "gpu"),
		inClassPartition(running(3, 1, 900, 950), "opp"))
	want := opportunisticReason(900, 300, false)
	if d[0].Reason != want || !strings.HasPrefix(want, reasontext.WaitingPrefix+"opportunistic: ") || !strings.Contains(want, "guaranteed from ") {
		t.Fatalf("waiting opportunistic job's reason %q, want %q", d[0].Reason, want)
	}
	if len(want) >= 128 {
		t.Fatalf("reason %q does not fit lachesis_prio_t.blocked", want)
	}
	if d[1].Reason != "" || d[2].Reason != "" {
		t.Fatalf("reasons of a guaranteed and a running job: %q, %q", d[1].Reason, d[2].Reason)
	}
	if d2 := pass(c, 1010, inClassPartition(pending(1, 1, 900), "opp")); d2[0].Reason != want {
		t.Fatalf("the reason changed from one pass to the next: %q", d2[0].Reason)
	}
}
