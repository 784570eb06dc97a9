package synth

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time the calling OS thread has consumed. The caller
// must be locked to its thread (runtime.LockOSThread) for this to mean
// anything.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		// Linux has had per-thread CPU clocks since 2.6.12; without one the
		// workload cannot model CPU work at all.
		panic("synth: CLOCK_THREAD_CPUTIME_ID: " + err.Error())
	}
	return time.Duration(ts.Nano())
}

// spinChunk is how much of a sample one pass of decode hashes between two
// looks at the clock: a few microseconds of work, so the CPU time spent per
// sample overshoots its budget by little while the clock (a system call)
// costs a small fraction of the work.
const spinChunk = 4 << 10

// decode spends budget of the calling thread's CPU time hashing sample
// over and over, a stand-in for decoding and augmenting it. It returns the
// hash so the work cannot be optimised away.
func decode(sample []byte, budget time.Duration, h uint64) uint64 {
	if len(sample) == 0 {
		sample = []byte{0}
	}
	end := threadCPU() + budget
	off := 0
	for threadCPU() < end {
		chunk := sample[off:min(off+spinChunk, len(sample))]
		for _, b := range chunk {
			h = (h ^ uint64(b)) * 0x100000001b3 // FNV-1a
		}
		off += len(chunk)
		if off >= len(sample) {
			off = 0
		}
	}
	return h
}
