//go:build cgo

package main

/*
#include "lachesis_core.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The sizing goroutine of job_submit/synergy.
//
// slurmctld serves each RPC on a new thread. A C thread that calls into Go
// leaves Go, on return, holding a Go processor in the "in a C call" state,
// and Go's monitor thread (sysmon) then polls every 20 µs until it takes
// that processor back, and goes on polling for a millisecond or more after
// every such call: about 80 µs of slurmctld CPU per submission, measured
// with perf, even when one long-lived C thread makes every call. A cgo call
// from Go into C wakes the sleeping monitor the same way.
//
// So the job is handed over without crossing between C and Go at all: the
// RPC thread fills a slot (lachesis_size_slot_t) in C memory and writes an
// eventfd; this goroutine, parked in Go's poller on that eventfd, sizes the
// job and writes the slot's own done eventfd, which the RPC thread polls.
// A slot's state moves by atomic compare-and-swap on both sides
// (lachesis_core.h lists the transitions), and the eventfds are read and
// written with raw system calls, which do not wake the monitor either. The
// sizing path makes no cgo call (boundedString reads C strings in Go).
//
// From Slurm 23.02 several RPC threads run job_submit at once, so the
// plugin hands over an array of slots (size_handoff.c): each thread fills
// one of its own, and one wake-up may stand for several asked slots, so
// serve looks at every slot each time it wakes. One goroutine sizes them
// in turn: a sizing takes tens of microseconds.

// sizeSlot is the slot as Go sees it; cInt, cInt32 and cUint32 are C's
// types, for sizing functions and slots written in tests (which cannot
// import "C").
type (
	sizeSlot = C.lachesis_size_slot_t
	cInt     = C.int
	cInt32   = C.int32_t
	cUint32  = C.uint32_t
)

// Slot states, as in lachesis_core.h.
const (
	slotIdle      = int32(C.LACHESIS_SLOT_IDLE)
	slotAsked     = int32(C.LACHESIS_SLOT_ASKED)
	slotBusy      = int32(C.LACHESIS_SLOT_BUSY)
	slotDone      = int32(C.LACHESIS_SLOT_DONE)
	slotAbandoned = int32(C.LACHESIS_SLOT_ABANDONED)
	slotStale     = int32(C.LACHESIS_SLOT_STALE)
)

// errSizerRunning: lachesis_sizer_start while a sizing goroutine runs.
var errSizerRunning = errors.New("a sizing goroutine is already running")

// maxSizerSlots bounds the slots lachesis_sizer_start accepts (the plugin
// has SIZE_HANDOFF_SLOTS).
const maxSizerSlots = 64

type sizer struct {
	slots  []sizeSlot // the caller's, in C memory; each done_fd is the caller's
	ask    *os.File   // our duplicate of the caller's ask eventfd
	size   func(*sizeSlot) cInt
	exited chan struct{}
	buf    [8]byte // eventfd reads land here
	one    uint64  // eventfd writes come from here
}

var (
	sizerMu  sync.Mutex
	theSizer *sizer
)

// errSizerSlot: a slot without a done eventfd.
var errSizerSlot = errors.New("a sizing slot has no done eventfd")

// startSizer starts the goroutine that serves slots with size (sizeSlotJob
// in slurmctld; tests pass their own).
func startSizer(slots []sizeSlot, askFd int, size func(*sizeSlot) cInt) error {
	sizerMu.Lock()
	defer sizerMu.Unlock()
	if theSizer != nil {
		return errSizerRunning
	}
	for i := range slots {
		if slots[i].done_fd < 0 {
			return fmt.Errorf("%w: slot %d", errSizerSlot, i)
		}
	}
	// A duplicate, so that closing it (stopSizer) wakes the goroutine and
	// the caller's descriptor stays the caller's. Non-blocking (the flag
	// is the shared file description's) so that Go's poller takes it.
	fd, err := unix.FcntlInt(uintptr(askFd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("duplicating the ask eventfd: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return fmt.Errorf("making the ask eventfd non-blocking: %w", err)
	}
	s := &sizer{slots: slots, ask: os.NewFile(uintptr(fd), "lachesis-sizer-ask"),
		size: size, exited: make(chan struct{}), one: 1}
	conn, err := s.ask.SyscallConn()
	if err != nil {
		s.ask.Close()
		return fmt.Errorf("polling the ask eventfd: %w", err)
	}
	theSizer = s
	go s.run(conn)
	return nil
}

// stopSizer closes the goroutine's eventfd and waits up to wait for it to
// return; false when it is still sizing a job.
func stopSizer(wait time.Duration) bool {
	sizerMu.Lock()
	s := theSizer
	theSizer = nil
	sizerMu.Unlock()
	if s == nil {
		return true
	}
	s.ask.Close() // wakes a parked Read with an error
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-s.exited:
		return true
	case <-t.C:
		return false
	}
}

func (s *sizer) run(conn syscall.RawConn) {
	defer close(s.exited)
	read := func(fd uintptr) bool {
		_, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&s.buf[0])), uintptr(len(s.buf)))
		return errno != syscall.EAGAIN // EINTR too: serve looks at the state
	}
	for {
		if err := conn.Read(read); err != nil {
			return // closed by stopSizer
		}
		s.serve()
	}
}

// serve sizes every slot's job that is asked for. A slot asked after the
// goroutine passed it has written the ask eventfd after its state, so the
// next read returns at once and the next serve finds it.
func (s *sizer) serve() {
	for i := range s.slots {
		s.serveSlot(&s.slots[i])
	}
}

// serveSlot sizes the slot's job if one is asked for: a job its RPC thread
// already took back (or none) is left alone.
func (s *sizer) serveSlot(slot *sizeSlot) {
	state := (*int32)(unsafe.Pointer(&slot.state))
	if !atomic.CompareAndSwapInt32(state, slotAsked, slotBusy) {
		return
	}
	slot.rc = s.size(slot)
	if atomic.CompareAndSwapInt32(state, slotBusy, slotDone) {
		syscall.RawSyscall(syscall.SYS_WRITE, uintptr(slot.done_fd), uintptr(unsafe.Pointer(&s.one)), 8) //nolint:errcheck // eventfd: cannot fill up; the state is the answer
		return
	}
	// Abandoned: its RPC thread gave up and nobody reads the answer; the
	// next RPC thread frees the request.
	atomic.StoreInt32(state, slotStale)
}

// sizeSlotJob sizes the slot's job as lachesis_size_job does.
func sizeSlotJob(slot *sizeSlot) (rc C.int) {
	defer recoverInto(&rc, "lachesis sizing goroutine")
	return sizeJob(&slot.req, slot.nodes, slot.n, &slot.out)
}
