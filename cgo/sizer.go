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
// job and writes a second eventfd that the RPC thread polls. The slot's
// state moves by atomic compare-and-swap on both sides (lachesis_core.h
// lists the transitions), and the eventfds are read and written with raw
// system calls, which do not wake the monitor either. The sizing path makes
// no cgo call (boundedString reads C strings in Go).

// sizeSlot is the slot as Go sees it; cInt is C's int, for sizing
// functions written in tests (which cannot import "C").
type (
	sizeSlot = C.lachesis_size_slot_t
	cInt     = C.int
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

type sizer struct {
	slot   *sizeSlot
	ask    *os.File // our duplicate of the caller's ask eventfd
	doneFd int      // the caller's: written, never closed here
	size   func(*sizeSlot) cInt
	exited chan struct{}
	buf    [8]byte // eventfd reads land here
	one    uint64  // eventfd writes come from here
}

var (
	sizerMu  sync.Mutex
	theSizer *sizer
)

// startSizer starts the goroutine that serves slot with size (sizeSlotJob
// in slurmctld; tests pass their own).
func startSizer(slot *sizeSlot, askFd, doneFd int, size func(*sizeSlot) cInt) error {
	sizerMu.Lock()
	defer sizerMu.Unlock()
	if theSizer != nil {
		return errSizerRunning
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
	s := &sizer{slot: slot, ask: os.NewFile(uintptr(fd), "lachesis-sizer-ask"), doneFd: doneFd,
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

// serve sizes the slot's job if one is asked for: woken for a job its RPC
// thread already took back (or for none), it does nothing.
func (s *sizer) serve() {
	state := (*int32)(unsafe.Pointer(&s.slot.state))
	if !atomic.CompareAndSwapInt32(state, slotAsked, slotBusy) {
		return
	}
	s.slot.rc = s.size(s.slot)
	if atomic.CompareAndSwapInt32(state, slotBusy, slotDone) {
		syscall.RawSyscall(syscall.SYS_WRITE, uintptr(s.doneFd), uintptr(unsafe.Pointer(&s.one)), 8) //nolint:errcheck // eventfd: cannot fill up; the state is the answer
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
