/*
 * size_handoff_test.c - tests of size_handoff.c against a stand-in for the
 * core's sizing goroutine: a thread that follows the same protocol (wait
 * on ask_fd, ASKED -> BUSY, size, BUSY -> DONE and write done_fd, or
 * ABANDONED -> STALE), except that it sizes only when the test opens its
 * gate, so a "slow" sizing is an ordering, not a race against a clock.
 *
 * Built and run by cgo/handoff_test.go. Exit status 0 when all pass.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "size_handoff.h"

static int failures;

#define CHECK(cond)                                                       \
	do {                                                              \
		if (!(cond)) {                                            \
			fprintf(stderr, "%s:%d: %s: failed: %s\n", __FILE__, \
				__LINE__, __func__, #cond);               \
			failures++;                                       \
		}                                                         \
	} while (0)

/* The plugin's wait (SIZE_WAIT_MS in job_submit_synergy.c). */
#define PLUGIN_WAIT_MS 500

static int clears;		/* calls of the clear callback */

static void _clear(lachesis_size_slot_t *slot)
{
	free((char *) slot->req.name);
	memset(&slot->req, 0, sizeof(slot->req));
	slot->n = 0;
	clears++;
}

/* The stand-in goroutine. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool gate_open;		/* sizing may proceed */
	bool stop;
	int finished;		/* jobs it has finished sizing */
	pthread_t thread;
} fake = { .lock = PTHREAD_MUTEX_INITIALIZER,
	   .cond = PTHREAD_COND_INITIALIZER };

static int32_t _state(size_handoff_t *h)
{
	return __atomic_load_n(&h->slot.state, __ATOMIC_ACQUIRE);
}

static void *_fake_sizer(void *arg)
{
	size_handoff_t *h = arg;

	for (;;) {
		struct pollfd p = { .fd = h->ask_fd, .events = POLLIN };
		uint64_t v, one = 1;
		int32_t from = LACHESIS_SLOT_ASKED;

		poll(&p, 1, 50);
		pthread_mutex_lock(&fake.lock);
		if (fake.stop) {
			pthread_mutex_unlock(&fake.lock);
			return NULL;
		}
		pthread_mutex_unlock(&fake.lock);
		if (read(h->ask_fd, &v, sizeof(v)) != sizeof(v))
			continue;
		if (!__atomic_compare_exchange_n(&h->slot.state, &from,
						 LACHESIS_SLOT_BUSY, false,
						 __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
			continue;
		pthread_mutex_lock(&fake.lock);
		while (!fake.gate_open && !fake.stop)
			pthread_cond_wait(&fake.cond, &fake.lock);
		pthread_mutex_unlock(&fake.lock);
		/* "Sizing": three CPUs per GPU for a job named "job". */
		h->slot.out.action = LACHESIS_SIZE_SET;
		h->slot.out.cpus_per_gpu =
			(h->slot.req.name && !strcmp(h->slot.req.name, "job")) ? 3 : 1;
		h->slot.rc = LACHESIS_OK;
		from = LACHESIS_SLOT_BUSY;
		if (__atomic_compare_exchange_n(&h->slot.state, &from,
						LACHESIS_SLOT_DONE, false,
						__ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			(void) !write(h->done_fd, &one, sizeof(one));
		else
			__atomic_store_n(&h->slot.state, LACHESIS_SLOT_STALE,
					 __ATOMIC_RELEASE);
		pthread_mutex_lock(&fake.lock);
		fake.finished++;
		pthread_cond_broadcast(&fake.cond);
		pthread_mutex_unlock(&fake.lock);
	}
}

static void _gate(bool open)
{
	pthread_mutex_lock(&fake.lock);
	fake.gate_open = open;
	pthread_cond_broadcast(&fake.cond);
	pthread_mutex_unlock(&fake.lock);
}

static void _wait_finished(int n)
{
	pthread_mutex_lock(&fake.lock);
	while (fake.finished < n)
		pthread_cond_wait(&fake.cond, &fake.lock);
	pthread_mutex_unlock(&fake.lock);
}

/* A handoff whose sizer runs (with_thread) or is said to run but never
 * reads its eventfd (!with_thread). */
static void _open(size_handoff_t *h, bool with_thread)
{
	if (!size_handoff_open(h, _clear)) {
		perror("size_handoff_open");
		exit(2);
	}
	h->running = true;
	clears = 0;
	fake.stop = false;
	fake.finished = 0;
	fake.gate_open = true;
	if (with_thread)
		pthread_create(&fake.thread, NULL, _fake_sizer, h);
}

static void _close(size_handoff_t *h, bool with_thread)
{
	if (with_thread) {
		pthread_mutex_lock(&fake.lock);
		fake.stop = true;
		pthread_cond_broadcast(&fake.cond);
		pthread_mutex_unlock(&fake.lock);
		pthread_join(fake.thread, NULL);
	}
	size_handoff_close(h);
}

/* Acquires the slot and asks for a job named "job"; returns the result. */
static int _ask(size_handoff_t *h, int wait_ms, lachesis_sizing_t *out,
		int *rc)
{
	int why = -1;
	lachesis_size_slot_t *slot = size_handoff_acquire(h, &why);

	CHECK(slot != NULL);
	if (!slot)
		return why;
	slot->req.name = strdup("job");
	return size_handoff_ask(h, wait_ms, out, rc);
}

static void test_answer_in_time_is_returned_and_freed(void)
{
	size_handoff_t h = SIZE_HANDOFF_INIT;
	lachesis_sizing_t out = { 0 };
	int rc = -1;

	_open(&h, true);
	CHECK(_ask(&h, PLUGIN_WAIT_MS, &out, &rc) == HANDOFF_DONE);
	CHECK(rc == LACHESIS_OK);
	CHECK(out.action == LACHESIS_SIZE_SET && out.cpus_per_gpu == 3);
	CHECK(clears == 1);
	CHECK(_state(&h) == LACHESIS_SLOT_IDLE);
	_close(&h, true);
}

/* The plugin's timeout: the sizer is still at work when the wait ends. */
static void test_timeout_while_sizing_leaves_job_and_recovers(void)
{
	size_handoff_t h = SIZE_HANDOFF_INIT;
	lachesis_sizing_t out = { 0 };
	lachesis_size_slot_t *slot;
	int rc = -1, why = -1;

	_open(&h, true);
	_gate(false);
	CHECK(_ask(&h, PLUGIN_WAIT_MS, &out, &rc) == HANDOFF_TIMEOUT);
	CHECK(out.action == 0 && rc == -1);	/* nothing copied out */
	CHECK(_state(&h) == LACHESIS_SLOT_ABANDONED);
	CHECK(clears == 0);	/* the sizer may still read the request */

	/* While it is still being sized, the next job does not wait. */
	slot = size_handoff_acquire(&h, &why);
	CHECK(slot == NULL && why == HANDOFF_TIMEOUT);

	/* Once sized, nobody takes its answer; the next job frees it. */
	_gate(true);
	_wait_finished(1);
	CHECK(_state(&h) == LACHESIS_SLOT_STALE);
	CHECK(clears == 0);
	CHECK(_ask(&h, PLUGIN_WAIT_MS, &out, &rc) == HANDOFF_DONE);
	CHECK(clears == 2);
	CHECK(rc == LACHESIS_OK && out.cpus_per_gpu == 3);
	CHECK(_state(&h) == LACHESIS_SLOT_IDLE);
	_close(&h, true);
}

/* A sizer that never wakes: the request is taken back at the deadline. */
static void test_timeout_never_picked_up_takes_request_back(void)
{
	size_handoff_t h = SIZE_HANDOFF_INIT;
	lachesis_sizing_t out = { 0 };
	int rc = -1;

	_open(&h, false);
	CHECK(_ask(&h, 20, &out, &rc) == HANDOFF_TIMEOUT);
	CHECK(clears == 1);
	CHECK(_state(&h) == LACHESIS_SLOT_IDLE);
	_close(&h, false);
}

/* A done signal left over from an earlier job is not an answer. */
static void test_stale_done_signal_is_not_an_answer(void)
{
	size_handoff_t h = SIZE_HANDOFF_INIT;
	lachesis_sizing_t out = { 0 };
	uint64_t one = 1;
	int rc = -1;

	_open(&h, false);
	CHECK(write(h.done_fd, &one, sizeof(one)) == sizeof(one));
	CHECK(_ask(&h, 20, &out, &rc) == HANDOFF_TIMEOUT);
	CHECK(rc == -1);
	_close(&h, false);
}

static void test_no_sizer_reports_off(void)
{
	size_handoff_t h = SIZE_HANDOFF_INIT;
	int why = -1;

	CHECK(size_handoff_acquire(&h, &why) == NULL && why == HANDOFF_OFF);
}

int main(void)
{
	test_answer_in_time_is_returned_and_freed();
	test_timeout_while_sizing_leaves_job_and_recovers();
	test_timeout_never_picked_up_takes_request_back();
	test_stale_done_signal_is_not_an_answer();
	test_no_sizer_reports_off();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("size_handoff: all tests passed\n");
	return 0;
}
