package localapi

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/profiler"
)

type jobEndHandler struct{ got []JobEndRequest }

func (h *jobEndHandler) Profile(context.Context, Caller, ProfileRequest, func(profiler.Progress)) (Result, error) {
	return Result{}, nil
}
func (h *jobEndHandler) Status(Caller) (Status, error) { return Status{}, nil }
func (h *jobEndHandler) JobEnded(_ Caller, r JobEndRequest) error {
	h.got = append(h.got, r)
	return nil
}

// otherUID is neither root nor this process's user.
func otherUID() uint32 {
	if os.Getuid() == 4242 {
		return 4243
	}
	return 4242
}

func TestJobEndPermission(t *testing.T) {
	tests := []struct {
		name    string
		uid     uint32
		allowed bool
	}{
		{"root (slurmstepd) is accepted", 0, true},
		{"the agent's own user is accepted", uint32(os.Getuid()), true},
		{"another user is refused", otherUID(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &jobEndHandler{}
			s := &Server{handler: h, log: slog.New(slog.DiscardHandler)}
			a, b := net.Pipe()
			defer a.Close()
			done := make(chan Event, 1)
			go func() {
				var e Event
				sc := bufio.NewScanner(b)
				if sc.Scan() {
					_ = json.Unmarshal(sc.Bytes(), &e)
				}
				done <- e
			}()
			s.serveJobEnd(&eventWriter{conn: a}, Caller{UID: tc.uid}, &JobEndRequest{JobID: 7, End: 100})
			e := <-done
			if tc.allowed && (e.Error != "" || e.JobEnd == nil || len(h.got) != 1) {
				t.Fatalf("event %+v, handler got %v; want the report taken", e, h.got)
			}
			if !tc.allowed && (!strings.Contains(e.Error, ErrNotAllowed.Error()) || len(h.got) != 0) {
				t.Fatalf("event %+v, handler got %v; want a refusal and nothing taken", e, h.got)
			}
		})
	}
}

func TestReportJobEndReachesTheHandlerThroughTheSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "la")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	h := &jobEndHandler{}
	s, err := Listen(filepath.Join(dir, "a.sock"), h, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := ReportJobEnd(context.Background(), filepath.Join(dir, "a.sock"), 9, 1234); err != nil {
		t.Fatal(err)
	}
	if len(h.got) != 1 || h.got[0] != (JobEndRequest{JobID: 9, End: 1234}) {
		t.Fatalf("handler got %v", h.got)
	}
	if err := ReportJobEnd(context.Background(), filepath.Join(dir, "a.sock"), 0, 1234); err == nil {
		t.Fatal("job 0 accepted")
	}
}

// TestRootIsNotCappedPerUID is from issue 20 item 9: slurmstepd reports
// each job end as root, so root's connections were capped at
// maxConnsPerUID like a user's and a node's fifth simultaneous job end was
// refused.
func TestRootIsNotCappedPerUID(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test needs root: the socket learns its callers' uid from the kernel")
	}
	dir, err := os.MkdirTemp("", "la")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "a.sock")
	h := &jobEndHandler{}
	s, err := Listen(sock, h, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Job ends in progress: connected, their requests not sent yet.
	for i := 0; i < maxConnsPerUID+2; i++ {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		n := s.perUID[0]
		s.mu.Unlock()
		if n >= maxConnsPerUID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d root connections counted, want at least %d", n, maxConnsPerUID)
		}
	}
	if err := ReportJobEnd(context.Background(), sock, 11, 1234); err != nil {
		t.Fatalf("job end beside %d others in progress: %v", maxConnsPerUID+2, err)
	}
	if len(h.got) != 1 || h.got[0] != (JobEndRequest{JobID: 11, End: 1234}) {
		t.Fatalf("handler got %v", h.got)
	}
}
