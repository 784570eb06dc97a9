package agent

import (
	"context"
	"slices"
	"sync"
)

// sweepQueue admits one sweep at a time on the node (two sweeps would
// measure each other) and orders the waiting ones fairly: round-robin
// over users, each user's own requests first come, first served. A user
// who queues sixteen sweeps therefore delays another user's by at most
// one sweep, not sixteen.
type sweepQueue struct {
	mu       sync.Mutex
	running  *waiter
	waiting  []*waiter        // in arrival order
	lastTurn map[uint32]int64 // uid -> sequence number of its last start
	turns    int64
	arrivals int64
}

// waiter is one request in the queue.
type waiter struct {
	uid     uint32
	model   string
	arrival int64
	granted chan struct{} // closed when it may run
	// pos receives its latest place in the queue (1: next), replaced, not
	// queued, so a slow caller never blocks the queue.
	pos chan position
}

// position is a waiter's place and what runs now.
type position struct {
	place   int
	running string
}

func newSweepQueue() *sweepQueue { return &sweepQueue{lastTurn: map[uint32]int64{}} }

// acquire waits for the slot, calling wait with the place in the queue each
// time it changes (from this goroutine, so it may block). It returns
// ctx's error if ctx ends first; release must follow a nil return.
func (q *sweepQueue) acquire(ctx context.Context, uid uint32, model string, wait func(position)) error {
	w := &waiter{uid: uid, model: model, granted: make(chan struct{}), pos: make(chan position, 1)}
	q.mu.Lock()
	q.arrivals++
	w.arrival = q.arrivals
	if q.running == nil && len(q.waiting) == 0 {
		q.start(w)
		q.mu.Unlock()
		return nil
	}
	q.waiting = append(q.waiting, w)
	q.announce()
	q.mu.Unlock()
	for {
		select {
		case <-w.granted:
			return nil
		case p := <-w.pos:
			if wait != nil {
				wait(p)
			}
		case <-ctx.Done():
			q.mu.Lock()
			select {
			case <-w.granted: // granted meanwhile: hand the slot on
				q.mu.Unlock()
				q.release()
				return ctx.Err()
			default:
			}
			q.waiting = slices.DeleteFunc(q.waiting, func(x *waiter) bool { return x == w })
			q.announce()
			q.mu.Unlock()
			return ctx.Err()
		}
	}
}

// release frees the slot for the next waiter in fair order.
func (q *sweepQueue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.running = nil
	if order := q.order(); len(order) > 0 {
		next := order[0]
		q.waiting = slices.DeleteFunc(q.waiting, func(x *waiter) bool { return x == next })
		q.start(next)
		q.announce()
	}
}

// start gives w the slot; q.mu is held.
func (q *sweepQueue) start(w *waiter) {
	q.turns++
	q.lastTurn[w.uid] = q.turns
	q.running = w
	close(w.granted)
}

// order is the waiting requests in the order they will run: repeatedly
// the user whose last turn is oldest (never is oldest of all; ties go to
// the earlier arrival) runs their earliest request. q.mu is held.
func (q *sweepQueue) order() []*waiter {
	last := make(map[uint32]int64, len(q.lastTurn))
	for uid, t := range q.lastTurn {
		last[uid] = t
	}
	left := slices.Clone(q.waiting)
	out := make([]*waiter, 0, len(left))
	turn := q.turns
	for len(left) > 0 {
		best := -1
		seen := map[uint32]bool{}
		for i, w := range left {
			if seen[w.uid] { // only each user's earliest request competes
				continue
			}
			seen[w.uid] = true
			if best < 0 || last[w.uid] < last[left[best].uid] ||
				(last[w.uid] == last[left[best].uid] && w.arrival < left[best].arrival) {
				best = i
			}
		}
		w := left[best]
		turn++
		last[w.uid] = turn
		out = append(out, w)
		left = slices.Delete(left, best, best+1)
	}
	return out
}

// announce tells every waiter its place; q.mu is held.
func (q *sweepQueue) announce() {
	for i, w := range q.order() {
		select { // drop a stale position the waiter has not read yet
		case <-w.pos:
		default:
		}
		w.pos <- position{place: i + 1, running: q.runningFor(w.uid)}
	}
}

// otherUsersSweep stands for the model of a sweep that another user runs:
// which models a user profiles is theirs to tell.
const otherUsersSweep = "another user's model"

// runningFor names the running sweep as viewer may see it: its model for
// its own user and root, otherUsersSweep for anyone else. q.mu is held.
func (q *sweepQueue) runningFor(viewer uint32) string {
	switch {
	case q.running == nil:
		return ""
	case viewer == 0 || viewer == q.running.uid:
		return q.running.model
	}
	return otherUsersSweep
}

// state is what runs, as viewer may see it, and how many wait, for Status.
func (q *sweepQueue) state(viewer uint32) (running string, queued int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.runningFor(viewer), len(q.waiting)
}
