package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
	"github.com/lachesis-sched/lachesis/node-agent/agent"
	"github.com/lachesis-sched/lachesis/node-agent/config"
	"github.com/lachesis-sched/lachesis/node-agent/localapi"
)

const bob = 4343

func twoUsers(uid uint32) (agent.User, error) {
	if uid == bob {
		return agent.User{Name: "bob", GID: bob}, nil
	}
	return users(uid)
}

// dialAs connects to socket as uid: the kernel records the connecting
// thread's credentials for SO_PEERCRED, so a thread that dropped to uid
// (and is then thrown away) connects as that user would.
func dialAs(t *testing.T, socket string, uid uint32) net.Conn {
	t.Helper()
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with us
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			ch <- result{err: e}
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			ch <- result{err: e}
			return
		}
		c, err := net.Dial("unix", socket)
		ch <- result{c, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("connect as uid %d: %v", uid, r.err)
	}
	t.Cleanup(func() { r.c.Close() })
	return r.c
}

// send writes req on c and returns a reader of its events.
func send(t *testing.T, c net.Conn, req localapi.Request) func() localapi.Event {
	t.Helper()
	// A refused connection is answered and closed before the request is
	// read, so the write may fail; the answer is there to read anyway.
	_ = json.NewEncoder(c).Encode(req)
	sc := bufio.NewScanner(c)
	return func() localapi.Event {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if !sc.Scan() {
			t.Fatalf("no event: %v", sc.Err())
		}
		var e localapi.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		return e
	}
}

// TestOneUsersFloodDoesNotLockOthersOut is the attack of issue 9 item 4:
// user A sends 16 long profile requests; user B's status still answers
// and B's profile is queued, shown its place, and runs before A's others.
func TestOneUsersFloodDoesNotLockOthersOut(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, "connecting as other users needs root")
	}
	h := newHarness(t, func(_ *config.Config, d *agent.Deps) { d.Users = twoUsers })
	h.prof.block = make(chan struct{})
	if err := os.Chmod(filepath.Dir(h.cfg.Socket), 0o755); err != nil { // as /run/lachesis is
		t.Fatal(err)
	}
	long := func(model string) localapi.Request {
		r := request(model)
		r.PointSeconds = h.cfg.MaxPointDuration.Seconds()
		return localapi.Request{Op: localapi.OpProfile, Profile: &r}
	}
	accepted, refused := 0, 0
	for i := range 16 {
		next := send(t, dialAs(t, h.cfg.Socket, alice), long(fmt.Sprintf("a%d", i)))
		if i == 0 {
			waitFor(t, "A's first sweep", func() bool { return h.status().Running == "a0" })
			accepted++
			continue
		}
		switch e := next(); {
		case e.Progress != nil && strings.Contains(e.Progress.Message, fmt.Sprintf("place %d ", i)):
			accepted++
		case strings.Contains(e.Error, "too many connections"):
			refused++
		default:
			t.Fatalf("A's request %d: %+v", i, e)
		}
	}
	if accepted != 4 || refused != 12 {
		t.Fatalf("A: %d accepted, %d refused; want 4 and 12 (4 connections per user)", accepted, refused)
	}

	e := send(t, dialAs(t, h.cfg.Socket, bob), localapi.Request{Op: localapi.OpStatus})()
	// B is not told which model A profiles.
	if e.Status == nil || e.Status.Running != "another user's model" || e.Status.Queued != 3 {
		t.Fatalf("B's status: %+v", e)
	}
	bNext := send(t, dialAs(t, h.cfg.Socket, bob), long("b0"))
	if e := bNext(); e.Progress == nil || !strings.Contains(e.Progress.Message, "place 1 in this node's queue; the profile of another user's model is running") {
		t.Fatalf("B's first event: %+v", e)
	}
	// Let the sweeps run: B's goes right after A's first, not after all
	// of A's.
	close(h.prof.block)
	for e := bNext(); e.Result == nil; e = bNext() {
		if e.Error != "" {
			t.Fatalf("B's profile: %s", e.Error)
		}
	}
	h.prof.mu.Lock()
	defer h.prof.mu.Unlock()
	if len(h.prof.specs) < 2 || h.prof.specs[1].Credential.Uid != bob {
		t.Fatalf("B's sweep was not second: %d sweeps, second as uid %d", len(h.prof.specs), h.prof.specs[1].Credential.Uid)
	}
}

func TestSweepLongerThanTheCapIsStopped(t *testing.T) {
	h := newHarness(t, func(c *config.Config, _ *agent.Deps) {
		c.MaxPointDuration, c.MaxSweepDuration = time.Second, 200*time.Millisecond
	})
	h.prof.block = make(chan struct{}) // never closed: only the cap ends it
	req := request("bert")
	req.PointSeconds = 1
	_, err := h.agent.Profile(context.Background(), aliceCaller, req, nil)
	if !errors.Is(err, agent.ErrSweepTooLong) || !strings.Contains(err.Error(), "max_sweep_seconds") {
		t.Fatalf("got %v, want ErrSweepTooLong naming max_sweep_seconds", err)
	}
	if st := h.status(); st.Running != "" || st.Pending != 0 {
		t.Fatalf("status after the stop: %+v", st)
	}
}

func TestPointSecondsDefaultsWithinTheCap(t *testing.T) {
	h := newHarness(t, func(c *config.Config, _ *agent.Deps) { c.MaxPointDuration = 20 * time.Second })
	req := request("bert")
	req.PointSeconds = 0
	if _, err := h.agent.Profile(context.Background(), aliceCaller, req, nil); err != nil {
		t.Fatal(err)
	}
	if got := h.prof.specs[0].PointDuration; got != 20*time.Second {
		t.Fatalf("point %v, want the cap (20s) below the 60s default", got)
	}
}

func TestCancelledWaiterLeavesTheQueue(t *testing.T) {
	h := newHarness(t, nil)
	h.prof.block = make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := h.agent.Profile(context.Background(), aliceCaller, request("bert"), nil)
		first <- err
	}()
	waitFor(t, "the first sweep", func() bool { return h.status().Running == "bert" })
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		_, err := h.agent.Profile(ctx, aliceCaller, request("gpt"), nil)
		second <- err
	}()
	waitFor(t, "the second request queued", func() bool { return h.status().Queued == 1 })
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if st := h.status(); st.Queued != 0 || st.Running != "bert" {
		t.Fatalf("status after the cancel: %+v", st)
	}
	close(h.prof.block)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// The slot is free again, not held by the cancelled waiter.
	if _, err := h.agent.Profile(context.Background(), aliceCaller, request("t5"), nil); err != nil {
		t.Fatal(err)
	}
	if n := len(h.prof.specs); n != 2 {
		t.Fatalf("%d sweeps ran, want 2 (the cancelled one never)", n)
	}
}

// TestPointSecondsBelowTheFloorIsRefused is from issue 20 item 5: a user
// asking for one-millisecond points turns out a profile a few
// milliseconds, a flood at the controller; min_point_seconds refuses it.
func TestPointSecondsBelowTheFloorIsRefused(t *testing.T) {
	h := newHarness(t, func(c *config.Config, _ *agent.Deps) { c.MinPointDuration = 5 * time.Second })
	req := request("bert")
	req.PointSeconds = 0.001
	_, err := h.agent.Profile(context.Background(), aliceCaller, req, nil)
	if !errors.Is(err, agent.ErrBadRequest) || !strings.Contains(err.Error(), "min_point_seconds") {
		t.Fatalf("got %v, want a bad request naming min_point_seconds", err)
	}
	if len(h.prof.specs) != 0 {
		t.Fatal("the sweep ran")
	}
	// Without --point-seconds a request gets at least the floor.
	h2 := newHarness(t, func(c *config.Config, _ *agent.Deps) {
		c.MaxPointDuration, c.MinPointDuration = 20*time.Second, 10*time.Second
	})
	req.PointSeconds = 0
	if _, err := h2.agent.Profile(context.Background(), aliceCaller, req, nil); err != nil {
		t.Fatal(err)
	}
	if got := h2.prof.specs[0].PointDuration; got != 20*time.Second {
		t.Fatalf("point %v, want 20s", got)
	}
}
