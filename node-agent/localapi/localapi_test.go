package localapi_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"

	"github.com/lachesis-sched/lachesis/node-agent/localapi"
	"github.com/lachesis-sched/lachesis/profiler"
)

type fakeHandler struct {
	caller    chan localapi.Caller
	cancelled chan struct{}
	block     bool
	once      sync.Once
}

func (h *fakeHandler) Profile(ctx context.Context, c localapi.Caller, req localapi.ProfileRequest, progress func(profiler.Progress)) (localapi.Result, error) {
	if h.caller != nil { // nil: the fuzz target, which does not look
		h.caller <- c
	}
	if req.Model == "fail" {
		return localapi.Result{}, errors.New("workload failed: exit status 3")
	}
	progress(profiler.Progress{Point: 1, Points: 3, CPUs: 4, Throughput: 10, Message: "4 CPUs: 10"})
	progress(profiler.Progress{Point: 2, Points: 3, CPUs: 2, Throughput: 9})
	if h.block {
		<-ctx.Done()
		h.once.Do(func() { close(h.cancelled) })
		return localapi.Result{}, ctx.Err()
	}
	return localapi.Result{ID: "r1", Model: req.Model, Points: 2}, nil
}

// ReportProgress answers as if the caller's job were 100 + its pid's last
// digit: the job comes from the caller, never from the request.
func (h *fakeHandler) ReportProgress(_ context.Context, c localapi.Caller, rep localapi.ProgressReport) (localapi.ProgressAnswer, error) {
	if h.caller != nil {
		h.caller <- c
	}
	if rep.Iterations == 13 {
		return localapi.ProgressAnswer{}, errors.New("not from a job of yours")
	}
	return localapi.ProgressAnswer{JobID: 100 + uint32(c.PID%10), Iterations: rep.Iterations}, nil
}

func (h *fakeHandler) Status(localapi.Caller) (localapi.Status, error) {
	return localapi.Status{Node: "n1", Pending: 2}, nil
}

// socketPath is short: sun_path holds 107 bytes, test temp dirs can be long.
func socketPath(t testing.TB) string {
	dir, err := os.MkdirTemp("", "la")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755) // other users reach the socket, as in /run
	return filepath.Join(dir, "run", "agent.sock")
}

func serve(t testing.TB, h localapi.Handler) string {
	t.Helper()
	path := socketPath(t)
	s, err := localapi.Listen(path, h, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return path
}

func TestProfileStreamsProgressThenResult(t *testing.T) {
	h := &fakeHandler{caller: make(chan localapi.Caller, 1)}
	path := serve(t, h)
	var seen []profiler.Progress
	res, err := localapi.Profile(context.Background(), path, localapi.ProfileRequest{Model: "bert", Argv: []string{"true"}},
		func(p profiler.Progress) { seen = append(seen, p) })
	if err != nil {
		t.Fatal(err)
	}
	if res.ID != "r1" || res.Model != "bert" || len(seen) != 2 || seen[0].CPUs != 4 || seen[0].Message != "4 CPUs: 10" {
		t.Fatalf("result %+v, progress %+v", res, seen)
	}
	c := <-h.caller
	if c.UID != uint32(os.Getuid()) || c.PID != int32(os.Getpid()) {
		t.Fatalf("caller %+v; want this process (uid %d, pid %d)", c, os.Getuid(), os.Getpid())
	}
}

func TestSocketIsOpenToEveryUser(t *testing.T) {
	path := serve(t, &fakeHandler{})
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o666 {
		t.Fatalf("mode %v, want 0666", fi.Mode().Perm())
	}
}

func TestHandlerErrorReachesTheCLI(t *testing.T) {
	path := serve(t, &fakeHandler{caller: make(chan localapi.Caller, 1)})
	_, err := localapi.Profile(context.Background(), path, localapi.ProfileRequest{Model: "fail"}, nil)
	if !errors.Is(err, localapi.ErrAgent) || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("got %v", err)
	}
}

func TestCancellingTheCLICancelsTheRun(t *testing.T) {
	h := &fakeHandler{caller: make(chan localapi.Caller, 1), cancelled: make(chan struct{}), block: true}
	path := serve(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, err := localapi.Profile(ctx, path, localapi.ProfileRequest{Model: "bert"}, func(profiler.Progress) { cancel() })
		got <- err
	}()
	select {
	case <-h.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the run went on after the CLI hung up")
	}
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v", err)
	}
}

func TestStatus(t *testing.T) {
	path := serve(t, &fakeHandler{})
	st, err := localapi.GetStatus(context.Background(), path)
	if err != nil || st.Node != "n1" || st.Pending != 2 {
		t.Fatalf("%+v, %v", st, err)
	}
}

func TestMissingAgentIsReportedAsNotRunning(t *testing.T) {
	tests := []struct {
		name  string
		setup func(path string)
	}{
		{"absent socket means not running", func(string) {}},
		{"socket without listener means not running", func(path string) {
			os.MkdirAll(filepath.Dir(path), 0o755)
			l, _ := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			l.SetUnlinkOnClose(false)
			l.Close()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := socketPath(t)
			tc.setup(path)
			_, err := localapi.GetStatus(context.Background(), path)
			if !errors.Is(err, localapi.ErrAgentNotRunning) {
				t.Fatalf("got %v, want ErrAgentNotRunning", err)
			}
		})
	}
}

func TestListenReplacesAStaleSocketButNotALiveOne(t *testing.T) {
	path := socketPath(t)
	os.MkdirAll(filepath.Dir(path), 0o755)
	l, _ := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	l.SetUnlinkOnClose(false)
	l.Close()
	s, err := localapi.Listen(path, &fakeHandler{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	defer s.Close()
	if _, err := localapi.Listen(path, &fakeHandler{}, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("a second agent took over a live socket")
	}
}

func TestGarbageRequestIsAnsweredWithAnError(t *testing.T) {
	path := serve(t, &fakeHandler{})
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("{not json\n"))
	buf := make([]byte, 512)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _ := c.Read(buf)
	if !strings.Contains(string(buf[:n]), "bad request") {
		t.Fatalf("answer %q", buf[:n])
	}
}

func TestOneUsersConnectionsAreCappedWithAClearError(t *testing.T) {
	path := serve(t, &fakeHandler{})
	// An ordinary user: root is not capped per uid (slurmstepd reports
	// every job end as root).
	uid := os.Geteuid()
	if uid == 0 {
		cred, _ := testenv.User(t, "lachesis-tb")
		uid = int(cred.Uid)
	}
	var held []net.Conn
	asEUID(t, uid, func() {
		for range 4 {
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Error(err)
				return
			}
			held = append(held, c)
		}
		// The fifth is refused at once, before it sends anything.
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Error(err)
			return
		}
		held = append(held, c)
	})
	for _, c := range held {
		defer c.Close()
	}
	if len(held) != 5 {
		t.FailNow()
	}
	// The server serves connections concurrently, so the one it counts
	// fifth need not be the last dialled: exactly one of the five is
	// refused, at once, naming the limit; the others wait for a request.
	lines := make(chan string, len(held))
	for _, c := range held {
		go func(c net.Conn) {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			lines <- line
		}(c)
	}
	refused := 0
	for range held {
		line := <-lines
		if line == "" {
			continue
		}
		if !strings.Contains(line, "too many connections") || !strings.Contains(line, "at most 4") {
			t.Fatalf("a connection got %q; want a refusal naming the limit", line)
		}
		refused++
	}
	if refused != 1 {
		t.Fatalf("%d of 5 connections refused; want exactly one", refused)
	}
}

// asEUID runs f with the effective uid uid, so that connections it makes
// carry uid (SO_PEERCRED reports the effective uid at connect). Only root
// may change it, and gets it back.
func asEUID(t *testing.T, uid int, f func()) {
	t.Helper()
	if uid == os.Geteuid() {
		f()
		return
	}
	if err := syscall.Setresuid(-1, uid, -1); err != nil {
		t.Fatalf("seteuid %d: %v", uid, err)
	}
	defer func() {
		if err := syscall.Setresuid(-1, 0, -1); err != nil {
			panic(fmt.Sprintf("cannot become root again: %v", err))
		}
	}()
	f()
}

// A progress report reaches the handler with the caller the kernel names
// (this process) and its count; the handler's answer (the job it
// attributed the count to) comes back, as does its refusal.
func TestProgressReportCarriesOnlyTheCount(t *testing.T) {
	h := &fakeHandler{caller: make(chan localapi.Caller, 2)}
	path := serve(t, h)
	ans, err := localapi.ReportProgress(context.Background(), path, 1234)
	if err != nil {
		t.Fatal(err)
	}
	c := <-h.caller
	if c.UID != uint32(os.Getuid()) || c.PID != int32(os.Getpid()) {
		t.Fatalf("caller %+v; want this process", c)
	}
	if ans.Iterations != 1234 || ans.JobID != 100+uint32(os.Getpid()%10) {
		t.Fatalf("answer %+v", ans)
	}
	if _, err := localapi.ReportProgress(context.Background(), path, 13); !errors.Is(err, localapi.ErrAgent) ||
		!strings.Contains(err.Error(), "not from a job of yours") {
		t.Fatalf("the handler's refusal: %v", err)
	}
}

// rawRequest sends req on its own connection and returns the answer line.
func rawRequest(t *testing.T, path string, req []byte) string {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	go c.Write(req)
	line, _ := bufio.NewReader(c).ReadString('\n')
	return line
}

// The attacks on the progress op at the socket: a job id in the message
// (at the top, in the report, or as a job_end) is not honoured (the answer
// names the caller's job); an oversized report is refused before the
// handler sees it; a report without a count is refused.
func TestProgressRequestAttacks(t *testing.T) {
	h := &fakeHandler{caller: make(chan localapi.Caller, 10)}
	path := serve(t, h)
	own := fmt.Sprintf(`"job_id":%d`, 100+os.Getpid()%10)
	for _, req := range []string{
		`{"op":"progress","job_id":7,"report":{"iterations":5,"job_id":7}}`,
		`{"op":"progress","job_end":{"job_id":7,"end":1},"report":{"iterations":5,"job":7}}`,
	} {
		if got := rawRequest(t, path, []byte(req)); !strings.Contains(got, own) || !strings.Contains(got, `"iterations":5`) {
			t.Fatalf("%s: answer %q, want the caller's own job (%s)", req, got, own)
		}
		<-h.caller
	}
	big := `{"op":"progress","report":{"iterations":5},"pad":"` + strings.Repeat("x", 2000) + `"}`
	if got := rawRequest(t, path, []byte(big)); !strings.Contains(got, "bad request: a progress report of") {
		t.Fatalf("a 2 kB progress report: %q", got)
	}
	if got := rawRequest(t, path, []byte(`{"op":"progress"}`)); !strings.Contains(got, "without a report") {
		t.Fatalf("a report without a count: %q", got)
	}
	if got := rawRequest(t, path, []byte(`{"op":"progress","report":{"iterations":-1}}`)); !strings.Contains(got, "bad request") {
		t.Fatalf("a negative count: %q", got)
	}
	if len(h.caller) != 0 {
		t.Fatalf("%d refused requests reached the handler", len(h.caller))
	}
}

// A handler without ProgressHandler refuses the op.
func TestProgressWithoutATracker(t *testing.T) {
	path := serve(t, struct{ localapi.Handler }{&fakeHandler{}})
	if _, err := localapi.ReportProgress(context.Background(), path, 1); err == nil ||
		!strings.Contains(err.Error(), "does not take progress reports") {
		t.Fatalf("got %v", err)
	}
}
