package core

import (
	"bytes"
	"strings"
	"testing"
	"unsafe"
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
	plain := ReasonPrefix + "opportunistic: waits for GPUs no guaranteed job needs; guaranteed from "
	want := "; kept off node n1: beside job 1 (model resnet-18/bs64) the pa"
	if r := d[1].Blocked; !strings.HasPrefix(r, ReasonPrefix+"opportunistic (guaranteed from ") || !strings.Contains(r, want) || len(r) > maxGuestReason {
		t.Fatalf("kept-off guest's reason %q (%d bytes), want its upgrade time and %q, within %d bytes", r, len(r), want, maxGuestReason)
	}
	if !strings.HasPrefix(d[2].Blocked, plain) || strings.Contains(d[2].Blocked, "kept off") {
		t.Fatalf("guest kept off nothing: reason %q, want the plain one", d[2].Blocked)
	}
	again := pass(c, 1030, host, bad, good)
	if again[1].Blocked != d[1].Blocked || unsafe.StringData(again[1].Blocked) != unsafe.StringData(d[1].Blocked) {
		t.Fatalf("unchanged reason made anew: %q", again[1].Blocked)
	}
	pass(c, 1040, bad, good) // the host has ended: the node is lifted
	drain(t, c, sj)
	if d := pass(c, 1050, bad, good); !strings.HasPrefix(d[0].Blocked, plain) || strings.Contains(d[0].Blocked, "kept off") {
		t.Fatalf("after the host ended the reason is %q, want the plain one", d[0].Blocked)
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
	want := ReasonPrefix + "opportunistic; kept off node n1: introspection requeued it from there: its neighbour job 1 (model resnet)"
	if !strings.HasPrefix(d[1].Blocked, want) || len(d[1].Blocked) > maxGuestReason {
		t.Fatalf("held guest's reason %q, want it to start %q, within %d bytes", d[1].Blocked, want, maxGuestReason)
	}
	other := pending(3, 1, 900)
	other.Held = true
	if d := pass(c, 1110, host, held, other); d[2].Blocked != "" {
		t.Fatalf("a job held for no exclusion of Lachesis's got reason %q", d[2].Blocked)
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
