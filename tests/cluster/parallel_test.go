package cluster_test

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
)

// Cluster tests run in parallel: most of their time is spent waiting for
// Slurm (passes, scheduler cycles, requeue delays), so a 2-core machine runs
// several loopback clusters at once (`go test -parallel N`; make
// test-cluster picks N). Each cluster has its own directory (named after
// the test), munged, port block (reservePortBlock) and state, so nothing
// but the machine is shared.
//
// The start helpers (startCluster and the helpers built on it) mark the
// test parallel, so a new test that uses them runs in parallel with no
// extra line. (A test whose subtests start the clusters is itself serial
// unless it calls parallelUnlessAlone too: its subtests then run beside
// the other tests, not only beside each other.) A test that must run alone says so by calling runsAlone first:
// a memory bound of slurmctld, anything that installs system-wide, or a
// latency bound that other clusters' load would blur. Go runs such serial
// tests first, one at a time and with no parallel test running, then all
// the parallel ones.

// aloneTests holds the top-level tests that called runsAlone.
var aloneTests sync.Map

// parallelTests holds the tests already marked parallel: t.Parallel may be
// called only once, and a test may start more than one cluster.
var parallelTests sync.Map

// runsAlone keeps t, and every subtest of it, serial: the start helpers
// then leave it out of the parallel phase. why is what makes it so.
func runsAlone(t *testing.T, why string) {
	t.Helper()
	if strings.Contains(t.Name(), "/") {
		t.Fatalf("runsAlone(%q) must be called from a top-level test, not %s", why, t.Name())
	}
	aloneTests.Store(t.Name(), why)
}

// parallelUnlessAlone marks t parallel (once) unless its top-level test
// called runsAlone. Called by the start helpers before any cluster starts.
func parallelUnlessAlone(t *testing.T) {
	t.Helper()
	top, _, _ := strings.Cut(t.Name(), "/")
	if _, alone := aloneTests.Load(top); alone {
		return
	}
	if _, done := parallelTests.LoadOrStore(t, true); done {
		return
	}
	t.Parallel()
}

// A port block holds one cluster's ports (slurmctld on base, node K on
// base+K, slurmdbd and MariaDB on base+100 and base+101) or, handed out one
// by one, a test's other listeners (the core's agent and metrics ports, a
// node agent's, Prometheus). Blocks lie below the kernel's ephemeral range
// (32768 and up), so no outgoing connection of another test takes a port
// between the check and slurmctld's bind, below 20000, where clusters of
// older test binaries pick theirs at random, and clear of make bench's
// clusters (lachesis-ctldbench: 19817 and up) and make demo's. A block is held by a
// machine-wide lock (testenv.TryLock), so parallel tests (and test
// binaries) never get the same one; the lock goes when the test ends, or
// with its process.
const (
	portBlockSize  = 128
	portBlockFirst = 10240
	portBlockEnd   = 19712
	// scripts/cluster.sh's default (make demo's) cluster: 16817, nodes
	// above it, slurmdbd and MariaDB at +100 and +101.
	demoPortLow, demoPortHigh = 16817, 16817 + 101
)

// reservePortBlock returns the first port of a block of portBlockSize free
// loopback ports, held until t ends.
func reservePortBlock(t *testing.T) int {
	t.Helper()
	n := (portBlockEnd - portBlockFirst) / portBlockSize
	start := rand.IntN(n)
	for i := 0; i < n; i++ {
		base := portBlockFirst + (start+i)%n*portBlockSize
		if base <= demoPortHigh && base+portBlockSize > demoPortLow {
			continue
		}
		unlock, ok, err := testenv.TryLock(fmt.Sprintf("ports-%d", base))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue // another test holds it
		}
		if !portsFree(base, portBlockSize) {
			unlock() // something outside the tests listens there
			continue
		}
		t.Cleanup(unlock)
		return base
	}
	t.Fatalf("no free block of %d loopback ports in %d-%d", portBlockSize, portBlockFirst, portBlockEnd)
	return 0
}

func portsFree(base, n int) bool {
	for p := base; p < base+n; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// singlePorts hands out a test's single listener ports from blocks it
// reserved for them, keyed by *testing.T.
var singlePorts struct {
	sync.Mutex
	next map[*testing.T][2]int // next port, end of its block
}

// freeTCPAddr is a loopback address free for a listener that t starts.
func freeTCPAddr(t *testing.T) string {
	t.Helper()
	singlePorts.Lock()
	defer singlePorts.Unlock()
	if singlePorts.next == nil {
		singlePorts.next = map[*testing.T][2]int{}
	}
	r, ok := singlePorts.next[t]
	if !ok || r[0] == r[1] {
		base := reservePortBlock(t)
		r = [2]int{base, base + portBlockSize}
		if !ok {
			t.Cleanup(func() {
				singlePorts.Lock()
				delete(singlePorts.next, t)
				singlePorts.Unlock()
			})
		}
	}
	singlePorts.next[t] = [2]int{r[0] + 1, r[1]}
	return fmt.Sprintf("127.0.0.1:%d", r[0])
}
