/*
 * size_handoff.c - see size_handoff.h.
 *
 * A slot's state is the truth; the eventfds only wake the other side. A
 * wake-up may be stale (a done signal left by a job whose RPC thread had
 * already given up, an ask the goroutine finds taken back): each side
 * looks at the state after waking and goes back to waiting if it is not
 * its turn. taken[i] says which RPC thread owns slot i: only the owner
 * moves its state from IDLE, and a slot whose job was abandoned (BUSY ->
 * ABANDONED) is not taken again until the goroutine marked it STALE.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "size_handoff.h"

/* A thread that finds no idle slot looks again this often: a slot whose
 * abandoned job the goroutine finishes (STALE) frees without a signal. */
#define RECHECK_MS 10

static int32_t _state(lachesis_size_slot_t *slot)
{
	return __atomic_load_n(&slot->state, __ATOMIC_ACQUIRE);
}

static void _set_state(lachesis_size_slot_t *slot, int32_t state)
{
	__atomic_store_n(&slot->state, state, __ATOMIC_RELEASE);
}

static void _close_fds(size_handoff_t *h)
{
	for (int i = 0; i < SIZE_HANDOFF_SLOTS; i++) {
		if (h->slots[i].done_fd >= 0)
			close(h->slots[i].done_fd);
		h->slots[i].done_fd = -1;
	}
	if (h->ask_fd >= 0)
		close(h->ask_fd);
	h->ask_fd = -1;
}

bool size_handoff_open(size_handoff_t *h,
		       void (*clear)(size_handoff_t *h, int i))
{
	int err;

	for (int i = 0; i < SIZE_HANDOFF_SLOTS; i++)
		h->slots[i].done_fd = -1;
	if (!h->cond_ready) {
		pthread_condattr_t attr;

		pthread_condattr_init(&attr);
		pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
		pthread_cond_init(&h->freed, &attr);
		pthread_condattr_destroy(&attr);
		h->cond_ready = true;
	}
	if ((h->ask_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
		goto fail;
	for (int i = 0; i < SIZE_HANDOFF_SLOTS; i++) {
		h->slots[i].done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (h->slots[i].done_fd < 0)
			goto fail;
		_set_state(&h->slots[i], LACHESIS_SLOT_IDLE);
		h->taken[i] = false;
	}
	h->clear = clear;
	return true;
fail:
	err = errno;
	_close_fds(h);
	errno = err;
	return false;
}

/* Frees slot i's request and marks it idle; the caller owns it. */
static void _reset(size_handoff_t *h, int i)
{
	if (h->clear)
		h->clear(h, i);
	_set_state(&h->slots[i], LACHESIS_SLOT_IDLE);
}

static int64_t _now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t size_handoff_deadline(int wait_ms)
{
	/* +1: poll's milliseconds round down, the wait must not */
	return _now_ms() + wait_ms + 1;
}

/* Whether the goroutine is still sizing a job whose RPC thread gave up:
 * it sizes one job at a time, so a new one would only wait behind it. */
static bool _sizer_stuck(size_handoff_t *h)
{
	for (int i = 0; i < SIZE_HANDOFF_SLOTS; i++)
		if (_state(&h->slots[i]) == LACHESIS_SLOT_ABANDONED)
			return true;
	return false;
}

/* An idle or stale slot nobody holds, taken for the caller; -1 if none.
 * h->lock held. *stale says the slot still holds an abandoned request. */
static int _take_free(size_handoff_t *h, bool *stale)
{
	for (int i = 0; i < SIZE_HANDOFF_SLOTS; i++) {
		int32_t state;

		if (h->taken[i])
			continue;
		state = _state(&h->slots[i]);
		if ((state != LACHESIS_SLOT_IDLE) &&
		    (state != LACHESIS_SLOT_STALE))
			continue; /* abandoned, still being sized */
		h->taken[i] = true;
		*stale = (state == LACHESIS_SLOT_STALE);
		return i;
	}
	return -1;
}

int size_handoff_acquire(size_handoff_t *h, int64_t deadline, int *why)
{
	bool stale = false;
	int i = -1;

	pthread_mutex_lock(&h->lock);
	while (h->running && !_sizer_stuck(h) &&
	       ((i = _take_free(h, &stale)) < 0)) {
		int64_t now = _now_ms(), until;
		struct timespec ts;

		if (now >= deadline)
			break;
		until = (deadline - now > RECHECK_MS) ? now + RECHECK_MS :
							deadline;
		ts.tv_sec = until / 1000;
		ts.tv_nsec = (until % 1000) * 1000000;
		pthread_cond_timedwait(&h->freed, &h->lock, &ts);
	}
	if (!h->running) {
		if (i >= 0)
			h->taken[i] = false;
		pthread_mutex_unlock(&h->lock);
		*why = HANDOFF_OFF;
		return -1;
	}
	pthread_mutex_unlock(&h->lock);
	if (i < 0) {
		*why = HANDOFF_TIMEOUT;
		return -1;
	}
	if (stale)	/* its job was abandoned and has been sized since */
		_reset(h, i);
	return i;
}

static bool _take(int32_t *state, int32_t from, int32_t to)
{
	return __atomic_compare_exchange_n(state, &from, to, false,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

int size_handoff_ask(size_handoff_t *h, int i, int64_t deadline,
		     lachesis_sizing_t *out, int *rc)
{
	lachesis_size_slot_t *slot = &h->slots[i];
	uint64_t one = 1, drain;
	int32_t *state = &slot->state;
	int result = HANDOFF_TIMEOUT;

	/* A done signal may be left from a job answered just as its RPC
	 * thread gave up; clear it so this wait starts clean. */
	(void) !read(slot->done_fd, &drain, sizeof(drain));
	_set_state(slot, LACHESIS_SLOT_ASKED);
	if (write(h->ask_fd, &one, sizeof(one)) == sizeof(one)) {
		for (;;) {
			struct pollfd p = { .fd = slot->done_fd,
					    .events = POLLIN };
			int64_t left;

			if (_state(slot) == LACHESIS_SLOT_DONE)
				break;
			if ((left = deadline - _now_ms()) <= 0)
				break;
			if (poll(&p, 1, (int) left) > 0)
				(void) !read(slot->done_fd, &drain,
					     sizeof(drain));
		}
	}

	if (_take(state, LACHESIS_SLOT_ASKED, LACHESIS_SLOT_IDLE)) {
		/* never picked up: the request is ours again */
		_reset(h, i);
	} else if (_take(state, LACHESIS_SLOT_BUSY, LACHESIS_SLOT_ABANDONED)) {
		/* still being sized: the sizer marks it STALE when done and
		 * whoever takes the slot next frees it */
	} else {	/* DONE, possibly just after the deadline */
		*out = slot->out;
		*rc = slot->rc;
		_reset(h, i);
		result = HANDOFF_DONE;
	}
	pthread_mutex_lock(&h->lock);
	h->taken[i] = false;
	pthread_cond_signal(&h->freed);
	pthread_mutex_unlock(&h->lock);
	return result;
}

void size_handoff_close(size_handoff_t *h)
{
	pthread_mutex_lock(&h->lock);
	h->running = false;
	for (int i = 0; i < SIZE_HANDOFF_SLOTS; i++) {
		if (h->clear)
			h->clear(h, i);
		_set_state(&h->slots[i], LACHESIS_SLOT_IDLE);
		h->taken[i] = false;
	}
	_close_fds(h);
	pthread_cond_broadcast(&h->freed);
	pthread_mutex_unlock(&h->lock);
}
