//go:build cgo

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sizerFds makes the two eventfds the plugin makes (size_handoff_open).
func sizerFds(t *testing.T) (ask, done int) {
	t.Helper()
	var err error
	if ask, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if done, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(ask); unix.Close(done) })
	return ask, done
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
		t.Fatal(err)
	}
}

// waitDone blocks until done_fd is written (no deadline: the test's own
// timeout catches a sizer that never answers).
func waitDone(t *testing.T, doneFd int) {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(doneFd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			t.Fatal(err)
		}
		var b [8]byte
		if _, err := unix.Read(doneFd, b[:]); err == nil {
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
	askFd, doneFd := sizerFds(t)
	slot := new(sizeSlot)
	if err := startSizer(slot, askFd, doneFd, sizeSlotJob); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopSizer(time.Second) })
	ask(t, slot, askFd)
	waitDone(t, doneFd)
	if got := slotState(slot); got != slotDone {
		t.Fatalf("state %d after done signal, want DONE (%d)", got, slotDone)
	}
	// No core runs in this test binary: the real sizing path says so.
	if slot.rc != -4 { // LACHESIS_ENOTINIT
		t.Errorf("rc %d, want LACHESIS_ENOTINIT", slot.rc)
	}
}

func TestSizerMarksAbandonedJobStaleWithoutSignal(t *testing.T) {
	askFd, doneFd := sizerFds(t)
	slot := new(sizeSlot)
	entered, release := make(chan struct{}), make(chan struct{})
	slow := func(s *sizeSlot) cInt {
		close(entered)
		<-release
		return 0
	}
	if err := startSizer(slot, askFd, doneFd, slow); err != nil {
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
	if _, err := unix.Read(doneFd, b[:]); err != unix.EAGAIN {
		t.Errorf("done eventfd read: %v, want EAGAIN (no answer for an abandoned job)", err)
	}
}

func TestSizerIgnoresWakeupWithoutAskedJob(t *testing.T) {
	askFd, doneFd := sizerFds(t)
	slot := new(sizeSlot)
	calls := make(chan struct{}, 2)
	count := func(s *sizeSlot) cInt { calls <- struct{}{}; return 0 }
	if err := startSizer(slot, askFd, doneFd, count); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopSizer(time.Second) })
	// A job its RPC thread took back (ASKED -> IDLE) before the wake-up.
	if _, err := unix.Write(askFd, []byte{1, 0, 0, 0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	ask(t, slot, askFd) // then a real one: sized exactly once
	waitDone(t, doneFd)
	if n := len(calls); n != 1 {
		t.Errorf("sized %d times, want 1", n)
	}
}

func TestSizerStartTwiceFailsAndStopEndsGoroutine(t *testing.T) {
	askFd, doneFd := sizerFds(t)
	slot := new(sizeSlot)
	if err := startSizer(slot, askFd, doneFd, sizeSlotJob); err != nil {
		t.Fatal(err)
	}
	if err := startSizer(slot, askFd, doneFd, sizeSlotJob); err != errSizerRunning {
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
	askFd, doneFd := sizerFds(t)
	slot := new(sizeSlot)
	entered, release := make(chan struct{}), make(chan struct{})
	stuck := func(s *sizeSlot) cInt { close(entered); <-release; return 0 }
	if err := startSizer(slot, askFd, doneFd, stuck); err != nil {
		t.Fatal(err)
	}
	s := theSizer
	ask(t, slot, askFd)
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
