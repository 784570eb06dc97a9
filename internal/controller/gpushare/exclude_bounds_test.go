package gpushare

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// Issue 34 item 6: one user's flood of waiting guests, each of its own
// model, took every waiting-guest slot (1,024) and the pass's model
// budget (64); another user's guest was then never judged, so never kept
// off the node where it would slow the host. Each user now gets a fair
// share of both.
func TestOneUsersFloodOfWaitingGuestsLeavesAnotherUsersGuestSteered(t *testing.T) {
	var buf bytes.Buffer
	c := seededCore(t, &buf)
	defer c.Close()
	sj := newFakeSlurm()
	const other = 1003
	host := hostOn(1, "resnet-18/bs64")
	snaps := []Job{host}
	for k := 0; k < maxWaitingGuests+100; k++ {
		snaps = append(snaps, waitingGuestJob(uint32(100+k), mallory, fmt.Sprintf("flood-%d", k)))
	}
	snaps = append(snaps, waitingGuestJob(2, other, "resnet-50/bs64"))
	passesBesideBusyHost(c, sj, 4, snaps...)
	if got := sj.list(2); got != "n1" {
		t.Fatalf("the other user's guest has ExcNodeList %q beside a flood, want n1 (kept off the host it would slow)", got)
	}
	c.mu.Lock()
	flood := 0
	for _, g := range c.intro.waiting {
		if g.uid == mallory {
			flood++
		}
	}
	c.mu.Unlock()
	if flood > maxWaitingGuests/2 {
		t.Fatalf("the flooding user holds %d waiting-guest slots, more than its share %d", flood, maxWaitingGuests/2)
	}
}

// Issue 34 item 6: a job whose ExcNodeList Lachesis cannot take (over the
// bounds) failed its update at every pass and was sent again at the next:
// Slurm's commands once per pass for as long as it waited. Its updates
// are now rate-limited per job.
func TestAJobWhoseExcNodeListUpdateFailsIsNotSentEveryPass(t *testing.T) {
	var buf bytes.Buffer
	c := seededCore(t, &buf)
	defer c.Close()
	sj := newFakeSlurm()
	host := hostOn(1, "resnet-18/bs64")
	bad := waitingGuestJob(2, mallory, "resnet-50/bs64")
	sj.lists[2] = strings.Repeat("u1,", maxExcludedList/3+1) // over the bound: left alone
	sent := passesBesideBusyHost(c, sj, 30, host, bad)
	if sent == 0 || sent > exclusionSends {
		t.Fatalf("sent %d updates in 300 s of passes, want 1 to %d", sent, exclusionSends)
	}
}

// passesBesideBusyHost runs n passes over snaps, 10 s apart from 1000,
// owner's job 1 reporting its GPU g0 busy before each, and carries out
// on sj what each queues; it returns the number of updates sent.
func passesBesideBusyHost(c *testCore, sj *fakeSlurm, n int64, snaps ...Job) int {
	sent := 0
	for p := int64(0); p < n; p++ {
		c.ReportGPUUse(shardReport(995+10*p, 1, owner, "g0", 1, 90, 10))
		pass(c, 1000+10*p, snaps...)
		sent += c.CarryOutQueued(sj)
	}
	return sent
}
