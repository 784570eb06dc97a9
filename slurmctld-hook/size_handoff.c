/*
 * size_handoff.c - see size_handoff.h.
 *
 * The slot's state is the truth; the eventfds only wake the other side.
 * A wake-up may be stale (a done signal left by a job whose RPC thread had
 * already given up, an ask the goroutine finds taken back): each side
 * looks at the state after waking and goes back to waiting if it is not
 * its turn.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "size_handoff.h"

bool size_handoff_open(size_handoff_t *h,
		       void (*clear)(lachesis_size_slot_t *slot))
{
	h->ask_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (h->ask_fd < 0)
		return false;
	h->done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (h->done_fd < 0) {
		int err = errno;

		close(h->ask_fd);
		h->ask_fd = -1;
		errno = err;
		return false;
	}
	h->clear = clear;
	__atomic_store_n(&h->slot.state, LACHESIS_SLOT_IDLE, __ATOMIC_RELEASE);
	return true;
}

/* Frees the request and marks the slot idle; the caller owns it. */
static void _reset(size_handoff_t *h)
{
	if (h->clear)
		h->clear(&h->slot);
	__atomic_store_n(&h->slot.state, LACHESIS_SLOT_IDLE, __ATOMIC_RELEASE);
}

lachesis_size_slot_t *size_handoff_acquire(size_handoff_t *h, int *why)
{
	int state;

	pthread_mutex_lock(&h->lock);
	if (!h->running) {
		pthread_mutex_unlock(&h->lock);
		*why = HANDOFF_OFF;
		return NULL;
	}
	state = __atomic_load_n(&h->slot.state, __ATOMIC_ACQUIRE);
	if (state == LACHESIS_SLOT_STALE) {	/* abandoned, now finished */
		_reset(h);
		state = LACHESIS_SLOT_IDLE;
	}
	if (state != LACHESIS_SLOT_IDLE) {
		pthread_mutex_unlock(&h->lock);
		*why = HANDOFF_TIMEOUT;
		return NULL;
	}
	return &h->slot;
}

static int64_t _now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool _take(int32_t *state, int32_t from, int32_t to)
{
	return __atomic_compare_exchange_n(state, &from, to, false,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

int size_handoff_ask(size_handoff_t *h, int wait_ms, lachesis_sizing_t *out,
		     int *rc)
{
	/* +1: poll's milliseconds round down, the wait must not */
	int64_t deadline = _now_ms() + wait_ms + 1;
	uint64_t one = 1, drain;
	int32_t *state = &h->slot.state;
	int result = HANDOFF_TIMEOUT;

	/* A done signal may be left from a job answered just as its RPC
	 * thread gave up; clear it so this wait starts clean. */
	(void) !read(h->done_fd, &drain, sizeof(drain));
	__atomic_store_n(state, LACHESIS_SLOT_ASKED, __ATOMIC_RELEASE);
	if (write(h->ask_fd, &one, sizeof(one)) == sizeof(one)) {
		for (;;) {
			struct pollfd p = { .fd = h->done_fd, .events = POLLIN };
			int64_t left;

			if (__atomic_load_n(state, __ATOMIC_ACQUIRE) ==
			    LACHESIS_SLOT_DONE)
				break;
			if ((left = deadline - _now_ms()) <= 0)
				break;
			if (poll(&p, 1, (int) left) > 0)
				(void) !read(h->done_fd, &drain, sizeof(drain));
		}
	}

	if (_take(state, LACHESIS_SLOT_ASKED, LACHESIS_SLOT_IDLE)) {
		/* never picked up: the request is ours again */
		_reset(h);
	} else if (_take(state, LACHESIS_SLOT_BUSY, LACHESIS_SLOT_ABANDONED)) {
		/* still being sized: the sizer marks it STALE when done and
		 * the next acquire frees it */
	} else {	/* DONE, possibly just after the deadline */
		*out = h->slot.out;
		*rc = h->slot.rc;
		_reset(h);
		result = HANDOFF_DONE;
	}
	pthread_mutex_unlock(&h->lock);
	return result;
}

void size_handoff_close(size_handoff_t *h)
{
	pthread_mutex_lock(&h->lock);
	h->running = false;
	if (h->clear)
		h->clear(&h->slot);
	__atomic_store_n(&h->slot.state, LACHESIS_SLOT_IDLE, __ATOMIC_RELEASE);
	if (h->ask_fd >= 0)
		close(h->ask_fd);
	if (h->done_fd >= 0)
		close(h->done_fd);
	h->ask_fd = h->done_fd = -1;
	pthread_mutex_unlock(&h->lock);
}
