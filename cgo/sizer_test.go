//go:build cgo

package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sizerSlots makes n slots as the plugin does (size_handoff_open): each
// with its own done eventfd, and the shared ask eventfd.
func sizerSlots(t *testing.T, n int) (slots []sizeSlot, ask int) {
	t.Helper()
	var err error
	if ask, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	slots = make([]sizeSlot, n)
	for i := range slots {
		fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		slots[i].done_fd = cInt32(fd)
	}
	t.Cleanup(func() {
		unix.Close(ask)
		for i := range slots {
			unix.Close(int(slots[i].done_fd))
		}
	})
	return slots, ask
}

func slotState(s *sizeSlot) int32 { return atomic.LoadInt32((*int32)(unsafe.Pointer(&s.state))) }

func setSlotState(s *sizeSlot, v int32) {
	atomic.StoreInt32((*int32)(unsafe.Pointer(&s.state)), v)
}

// ask does what size_handoff_ask does first: ASKED, then the eventfd.
func ask(t *testing.T, s *sizeSlot, askFd int) {
	t.Helper()
	setSlotState(s, slotAsked)
	if _, err := unix.Write(askFd, []byte{1, 0, 0, 0, 0, 0, 0, 0}); err != nil {
		t.Error(err)
	}
}

// waitDone blocks until the slot's done eventfd is written (no deadline:
// the test's own timeout catches a sizer that never answers).
func waitDone(t *testing.T, s *sizeSlot) {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(s.done_fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			t.Error(err)
			return
		}
		var b [8]byte
		if _, err := unix.Read(int(s.done_fd), b[:]); err == nil {
			return
		}
	}
}

// waitState polls the slot until it reaches want (the goroutine writes no
// eventfd for an abandoned job, so there is nothing else to wait on).
func waitState(t *testing.T, s *sizeSlot, want int32) {
	t.Helper()
	for slotState(s) != want {
		time.Sleep(time.Millisecond)
	}
}

func TestSizerAnswersAskedJobAndSignalsDone(t *testing.T) {
	slots, askFd := sizerSlots(t, 1)
	slot := &slots[0]
	if err := startSizer(slots, askFd, sizeSlotJob); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopSizer(time.Second) })
	ask(t, slot, askFd)
	waitDone(t, slot)
	if got := slotState(slot); got != slotDone {
		t.Fatalf("state %d after done signal, want DONE (%d)", got, slotDone)
	}
	// No core runs in this test binary: the real sizing path says so.
	if slot.rc != -4 { // LACHESIS_ENOTINIT
		t.Errorf("rc %d, want LACHESIS_ENOTINIT", slot.rc)
	}
}

func TestSizerMarksAbandonedJobStaleWithoutSignal(t *testing.T) {
	slots, askFd := sizerSlots(t, 1)
	slot := &slots[0]
	entered, release := make(chan struct{}), make(chan struct{})
	slow := func(s *sizeSlot) cInt {
		close(entered)
		<-release
		return 0
	}
	if err := startSizer(slots, askFd, slow); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopSizer(time.Second) })
	ask(t, slot, askFd)
	<-entered
	if got := slotState(slot); got != slotBusy {
		t.Fatalf("state %d while sizing, want BUSY (%d)", got, slotBusy)
	}
	// The RPC thread's deadline passes (size_handoff_ask).
	if !atomic.CompareAndSwapInt32((*int32)(unsafe.Pointer(&slot.state)), slotBusy, slotAbandoned) {
		t.Fatal("could not abandon a busy slot")
	}
	close(release)
	waitState(t, slot, slotStale)
	var b [8]byte
	if _, err := unix.Read(int(slot.done_fd), b[:]); err != unix.EAGAIN {
		t.Errorf("done eventfd read: %v, want EAGAIN (no answer for an abandoned job)", err)
	}
}

func TestSizerIgnoresWakeupWithoutAskedJob(t *testing.T) {
	slots, askFd := sizerSlots(t, 2)
	calls := make(chan struct{}, 4)
	count := func(s *sizeSlot) cInt { calls <- struct{}{}; return 0 }
	if err := startSizer(slots, askFd, count); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopSizer(time.Second) })
	// A job its RPC thread took back (ASKED -> IDLE) before the wake-up.
	if _, err := unix.Write(askFd, []byte{1, 0, 0, 0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	ask(t, &slots[1], askFd) // then a real one: sized exactly once
	waitDone(t, &slots[1])
	if n := len(calls); n != 1 {
		t.Errorf("sized %d times, want 1", n)
	}
	if got := slotState(&slots[0]); got != slotIdle {
		t.Errorf("slot never asked is in state %d, want IDLE", got)
	}
}

// From Slurm 23.02 several RPC threads ask at once, each with its own slot:
// every thread gets the answer to its own job (here, the slot's index
// read back from the request), on its own done eventfd, however their asks
// interleave with the goroutine's passes over the slots.
func TestSizerAnswersEachSlotItsOwnJobUnderConcurrentAsks(t *testing.T) {
	const threads, rounds = 16, 300
	slots, askFd := sizerSlots(t, threads)
	// The job's "sizing": its CPUs per GPU are the number in its request's
	// num_tasks, which each thread sets to its own index and round.
	echo := func(s *sizeSlot) cInt {
		s.out.cpus_per_gpu = s.req.num_tasks
		return 0
	}
	if err := startSizer(slots, askFd, echo); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopSizer(time.Second) })
	var wg sync.WaitGroup
	var wrong atomic.Int32
	for i := range slots {
		wg.Add(1)
		go func(s *sizeSlot, id int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				want := uint32(id*rounds + r + 1)
				s.req.num_tasks = cUint32(want)
				ask(t, s, askFd)
				waitDone(t, s)
				if slotState(s) != slotDone || uint32(s.out.cpus_per_gpu) != want {
					wrong.Add(1)
				}
				setSlotState(s, slotIdle) // the answer taken (size_handoff_ask)
			}
		}(&slots[i], i)
	}
	wg.Wait()
	if n := wrong.Load(); n != 0 {
		t.Errorf("%d of %d answers were not their own job's", n, threads*rounds)
	}
}

func TestSizerRefusesASlotWithoutDoneEventfd(t *testing.T) {
	slots, askFd := sizerSlots(t, 2)
	slots[1].done_fd = -1
	if err := startSizer(slots, askFd, sizeSlotJob); !errors.Is(err, errSizerSlot) {
		stopSizer(time.Second)
		t.Fatalf("start with a slot lacking its eventfd: %v, want errSizerSlot", err)
	}
}

func TestSizerStartTwiceFailsAndStopEndsGoroutine(t *testing.T) {
	slots, askFd := sizerSlots(t, 1)
	if err := startSizer(slots, askFd, sizeSlotJob); err != nil {
		t.Fatal(err)
	}
	if err := startSizer(slots, askFd, sizeSlotJob); err != errSizerRunning {
		t.Errorf("second start: %v, want errSizerRunning", err)
	}
	s := theSizer
	if !stopSizer(time.Minute) {
		t.Fatal("stopSizer: goroutine still running")
	}
	select {
	case <-s.exited:
	default:
		t.Error("goroutine has not exited after stopSizer returned true")
	}
	// The caller's eventfd stays open (the goroutine closed its duplicate).
	if _, err := unix.Write(askFd, []byte{1, 0, 0, 0, 0, 0, 0, 0}); err != nil {
		t.Errorf("caller's ask eventfd after stop: %v", err)
	}
}

func TestSizerStopTimesOutWhileSizing(t *testing.T) {
	slots, askFd := sizerSlots(t, 1)
	entered, release := make(chan struct{}), make(chan struct{})
	stuck := func(s *sizeSlot) cInt { close(entered); <-release; return 0 }
	if err := startSizer(slots, askFd, stuck); err != nil {
		t.Fatal(err)
	}
	s := theSizer
	ask(t, &slots[0], askFd)
	<-entered
	if stopSizer(10 * time.Millisecond) {
		t.Error("stopSizer reported stopped while the goroutine was sizing")
	}
	close(release)
	<-s.exited // and it ends once the job is done
}

// The C side of the handoff (slurmctld-hook/size_handoff.c), including the
// plugin's 500 ms timeout, is tested by a C program against a stand-in
// sizer; it needs no Slurm, so it is built and run here.
func TestSizeHandoffC(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	bin := filepath.Join(t.TempDir(), "size_handoff_test")
	hook := filepath.Join("..", "slurmctld-hook")
	build := exec.Command(cc, "-O1", "-g", "-Wall", "-Werror", "-pthread", "-I.", "-I"+hook, "-o", bin,
		filepath.Join(hook, "size_handoff.c"), filepath.Join(hook, "size_handoff_test.c"))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the C test: %v\n%s", err, out)
	}
	run := exec.Command(bin)
	run.Stderr = os.Stderr
	if out, err := run.Output(); err != nil {
		t.Fatalf("C test: %v\n%s", err, out)
	}
}
