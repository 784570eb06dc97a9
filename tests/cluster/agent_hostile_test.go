package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/agentserver"
	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/protocol/munge"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/node-agent/deliver"
	"github.com/lachesis-sched/lachesis/profile"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// dialFrom connects to addr from a loopback address of its own
// (127.0.0.x), so one test plays several hosts.
func dialFrom(ip, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return d.Dial("tcp", addr)
}

// vmRSS is a process's resident memory in bytes, from /proc/<pid>/status.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("slurmctld (pid %d) is gone: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS line")
	return 0
}

// rssPeak samples pid's RSS every 20 ms until stop is closed.
func rssPeak(t *testing.T, pid int, stop <-chan struct{}) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var peak int64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
						kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
						peak = max(peak, kb<<10)
					}
				}
			}
			select {
			case <-stop:
				out <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// deepBody is {"zz": [[[...nil...]]]}, n bytes long: nested one level per
// byte under a key no report has, the shape the codec skips by recursion.
func deepBody(n int) []byte {
	b := append([]byte{0x81, 0xa2, 'z', 'z'}, bytes.Repeat([]byte{0x91}, n-5)...)
	return append(b, 0xc0)
}

func (e *agentEnv) controllerAlive(pid int) {
	e.t.Helper()
	if err := syscall.Kill(pid, 0); err != nil {
		e.t.Fatalf("slurmctld (pid %d) died: %v\n%s", pid, err, e.c.ControllerLog())
	}
	if now, err := e.c.ControllerPID(); err != nil || now != pid {
		e.t.Fatalf("slurmctld's pid is %d (%v), was %d", now, err, pid)
	}
	if !e.c.Ping() {
		e.t.Fatal("scontrol ping does not answer")
	}
}

func TestDeepFramesLeaveControllerMemoryBounded(t *testing.T) {
	runsAlone(t, "it bounds slurmctld's memory growth; other clusters' load would delay frees")
	const budget = 64 << 20
	for _, tc := range []struct {
		name string // short: the cluster's socket paths include it
		max  int
	}{{"default", config.Default().Agent.MaxFrameBytes}, {"cap", config.MaxFrameBytesCap}} {
		max := tc.max
		t.Run(tc.name, func(t *testing.T) {
			e := startAgentClusterWith(t, fmt.Sprintf("  max_frame_bytes: %d\n", max))
			signer := &munge.Client{Socket: e.socket}
			pid, err := e.c.ControllerPID()
			if err != nil {
				t.Fatal(err)
			}
			// One real report first, so the listener's steady state is the
			// baseline, not its first use.
			sendReal(t, e, "before-deep")
			base := vmRSS(t, pid)
			body := deepBody(max)
			for _, round := range []struct {
				name   string
				cred   func() string
				reason string
			}{
				{"unauthenticated", func() string { return "MUNGE:AwQFAAD-forged-credential-" + strings.Repeat("x", 900) + ":" }, "bad_credential"},
				{"authenticated", func() string {
					c, err := signer.Sign(wire.Digest(wire.TypeProfile, body))
					if err != nil {
						t.Fatal(err)
					}
					return c
				}, "too_deep"},
			} {
				creds := make([]string, 64)
				for i := range creds {
					creds[i] = round.cred()
				}
				stop := make(chan struct{})
				peak := rssPeak(t, pid, stop)
				var wg sync.WaitGroup
				var acks sync.Map
				for i := 0; i < 64; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						// Eight hosts of eight connections: the per-peer cap
						// lets every one in.
						c, err := dialFrom(fmt.Sprintf("127.0.0.%d", 2+i/8), e.listen)
						if err != nil {
							acks.Store(i, "dial: "+err.Error())
							return
						}
						defer c.Close()
						c.SetDeadline(time.Now().Add(30 * time.Second))
						head := append(wire.AppendHeader(nil, wire.TypeProfile, len(creds[i]), len(body)), creds[i]...)
						c.Write(head)
						c.Write(body)
						ack, err := wire.ReadAck(c, 1<<20)
						if err != nil {
							acks.Store(i, "no ack: "+err.Error())
							return
						}
						acks.Store(i, ack.Error)
					}()
				}
				wg.Wait()
				time.Sleep(2 * time.Second) // what is freed late still counts
				close(stop)
				p := <-peak
				counts := map[string]int{}
				acks.Range(func(_, v any) bool { counts[v.(string)]++; return true })
				t.Logf("%s round, 64 frames of %d bytes nested %d deep: slurmctld RSS %d MB before, peak %d MB (+%d MB); answers %v",
					round.name, max, max-5, base>>20, p>>20, (p-base)>>20, counts)
				if p-base >= budget {
					t.Fatalf("%s: slurmctld grew by %d MB, budget %d MB", round.name, (p-base)>>20, budget>>20)
				}
				e.controllerAlive(pid)
				if counts[round.reason] == 0 {
					t.Fatalf("%s: no frame refused as %s: %v", round.name, round.reason, counts)
				}
				e.eventually(10*time.Second, round.reason+" in slurmctld's log", func() (bool, string) {
					return e.logMatches(`agent report rejected peer=\S+ reason=` + round.reason), ""
				})
			}
			job := e.submit("-J", "after-deep", "--wrap", "sleep 1")
			e.waitState(job, "COMPLETED", 60*time.Second)
			sendReal(t, e, "after-deep")
			e.controllerAlive(pid)
		})
	}
}

// sendReal sends a real report the way the agent does (deliver.Client,
// the cluster's munged) and returns how long it took.
func sendReal(t *testing.T, e *agentEnv, model string) time.Duration {
	t.Helper()
	c := &deliver.Client{Addr: e.listen, Signer: &munge.Client{Socket: e.socket}, Timeout: 20 * time.Second}
	rec := profile.Record{ID: fmt.Sprintf("%s-%d", model, time.Now().UnixNano()), Model: model, Node: "lnode1", Finished: time.Now(),
		Best: sensitivity.Demand{CPUsPerGPU: 1, MemGBPerGPU: 1}}
	begin := time.Now()
	ack, err := c.Send(context.Background(), wire.TypeProfile, &wire.ProfileReport{Record: rec})
	if err != nil || !ack.OK {
		t.Fatalf("real report %s: %+v, %v\n%s", model, ack, err, e.c.ControllerLog())
	}
	return time.Since(begin)
}

func TestSlowlorisDoesNotDelayARealReport(t *testing.T) {
	runsAlone(t, "it bounds a report's latency under 500 connections; other clusters' load would blur it")
	e := startAgentCluster(t)
	pid, err := e.c.ControllerPID()
	if err != nil {
		t.Fatal(err)
	}
	job := e.submit("-J", "during-slowloris", "--wrap", "sleep 2")
	e.waitState(job, "RUNNING", 30*time.Second)

	// 500 connections from ten hosts send two bytes and hold; each comes
	// back a second after the core drops it, so the slots stay under
	// siege for the whole test.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var held, dropped atomic.Int64
	for i := 0; i < 500; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c, err := dialFrom(fmt.Sprintf("127.0.0.%d", 2+i%10), e.listen)
				if err == nil {
					c.Write([]byte("LC"))
					begin := time.Now()
					c.SetReadDeadline(time.Now().Add(60 * time.Second))
					_, err = io.Copy(io.Discard, c) // until the core closes it
					c.Close()
					if time.Since(begin) > 500*time.Millisecond {
						held.Add(1)
					}
					if err == nil {
						dropped.Add(1)
					}
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	e.eventually(15*time.Second, "the siege in slurmctld's log", func() (bool, string) {
		return e.logMatches(`reason=peer_connection_limit`), ""
	})

	// A report sent as the agent sends it arrives promptly.
	var worst time.Duration
	for i := 0; i < 5; i++ {
		worst = max(worst, sendReal(t, e, "slowloris-direct"))
	}
	// And the real agent's: profiled, spooled, delivered while besieged.
	out := e.profile("synth-slowloris")
	returned := time.Now()
	if !strings.Contains(out, "delivered to the controller") {
		t.Fatalf("the agent's profile did not arrive:\n%s\nagent log:\n%s", out, e.agentLogText())
	}
	s := e.store()
	rec, ok, err := s.Latest("synth-slowloris")
	s.Close()
	if err != nil || !ok {
		t.Fatalf("profile not stored: %v", err)
	}
	// Finished is stamped when the sweep ends; the CLI returns once the
	// controller has acked, so this bounds spooling plus delivery.
	delivery := returned.Sub(rec.Finished)
	t.Logf("under slowloris: 5 direct reports took at most %v; the agent's profile arrived within %v of its sweep's end; %d holds dropped by the core so far",
		worst, delivery, held.Load())
	if margin := agentserver.DefaultAuthTimeout + 2*time.Second; worst > margin || delivery > margin {
		t.Fatalf("reports delayed: direct %v, agent %v; want within the auth deadline plus 2 s (%v)", worst, delivery, margin)
	}
	// Delivered on the first attempt: the siege reset nothing.
	if !regexp.MustCompile(`msg="profile delivered" model=synth-slowloris id=\S+ duplicate=false attempts=1\b`).MatchString(e.agentLogText()) {
		t.Fatalf("the agent does not log a first-attempt delivery:\n%s", e.agentLogText())
	}

	// Stop the siege: every held connection is dropped by the core within
	// its auth deadline, so the goroutines end.
	cancel()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(agentserver.DefaultAuthTimeout + 5*time.Second):
		t.Fatal("held connections still open past the auth deadline")
	}
	if held.Load() == 0 {
		t.Fatal("no connection was held and then dropped by the core")
	}
	for _, reason := range []string{"auth_timeout", "peer_connection_limit"} {
		if !e.logMatches(`agent report rejected peer=\S+ reason=` + reason) {
			t.Fatalf("slurmctld's log has no reason=%s", reason)
		}
	}
	e.waitState(job, "COMPLETED", 60*time.Second)
	second := e.submit("-J", "after-slowloris", "--wrap", "sleep 1")
	e.waitState(second, "COMPLETED", 60*time.Second)
	// The slots are free: a report goes through at once, and slurmctld is
	// the same process.
	sendReal(t, e, "after-slowloris")
	e.controllerAlive(pid)
}
