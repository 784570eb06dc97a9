/*
 * size_handoff_test.c - tests of size_handoff.c against a stand-in for the
 * core's sizing goroutine: a thread that follows the same protocol (wait
 * on ask_fd, then for every slot: ASKED -> BUSY, size, BUSY -> DONE and
 * write the slot's done_fd, or ABANDONED -> STALE), except that it sizes
 * only when the test opens its gate, so a "slow" sizing is an ordering, not
 * a race against a clock, and that it may be told to take a while per job.
 *
 * Built and run by cgo/sizer_test.go (TestSizeHandoffC). Exit status 0
 * when all pass.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "size_handoff.h"

static int failures;
static pthread_mutex_t failures_lock = PTHREAD_MUTEX_INITIALIZER;

#define CHECK(cond)                                                       \
	do {                                                              \
		if (!(cond)) {                                            \
			fprintf(stderr, "%s:%d: %s: failed: %s\n", __FILE__, \
				__LINE__, __func__, #cond);               \
			pthread_mutex_lock(&failures_lock);               \
			failures++;                                       \
			pthread_mutex_unlock(&failures_lock);             \
		}                                                         \
	} while (0)

/* The plugin's wait (SIZE_WAIT_MS in job_submit_synergy.c). */
#define PLUGIN_WAIT_MS 500

static int clears;		/* requests freed by the clear callback */

static void _clear(size_handoff_t *h, int i)
{
	lachesis_size_slot_t *slot = &h->slots[i];

	if (slot->req.name)
		__atomic_add_fetch(&clears, 1, __ATOMIC_RELAXED);
	free((char *) slot->req.name);
	memset(&slot->req, 0, sizeof(slot->req));
	slot->n = 0;
}

static int _clears(void)
{
	return __atomic_load_n(&clears, __ATOMIC_RELAXED);
}

/* The stand-in goroutine. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool gate_open;		/* sizing may proceed */
	bool stop;
	int finished;		/* jobs it has finished sizing */
	int sizing_ms;		/* how long each sizing takes */
	pthread_t thread;
} fake = { .lock = PTHREAD_MUTEX_INITIALIZER,
	   .cond = PTHREAD_COND_INITIALIZER };

static int32_t _state(size_handoff_t *h, int i)
{
	return __atomic_load_n(&h->slots[i].state, __ATOMIC_ACQUIRE);
}

static int64_t _ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "Sizing": a job named "job-N" gets N CPUs per GPU, any other name 1, so
 * an answer that reached the wrong thread shows. */
static uint32_t _cpus_for(const char *name)
{
	return (name && !strncmp(name, "job-", 4)) ?
		(uint32_t) strtoul(name + 4, NULL, 10) : 1;
}

static void _serve(size_handoff_t *h, int i)
{
	lachesis_size_slot_t *slot = &h->slots[i];
	int32_t from = LACHESIS_SLOT_ASKED;
	uint64_t one = 1;
	int sizing_ms;

	if (!__atomic_compare_exchange_n(&slot->state, &from,
					 LACHESIS_SLOT_BUSY, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&fake.lock);
	while (!fake.gate_open && !fake.stop)
		pthread_cond_wait(&fake.cond, &fake.lock);
	sizing_ms = fake.sizing_ms;
	pthread_mutex_unlock(&fake.lock);
	if (sizing_ms)
		usleep(sizing_ms * 1000);
	slot->out.action = LACHESIS_SIZE_SET;
	slot->out.cpus_per_gpu = _cpus_for(slot->req.name);
	slot->rc = LACHESIS_OK;
	from = LACHESIS_SLOT_BUSY;
	if (__atomic_compare_exchange_n(&slot->state, &from,
					LACHESIS_SLOT_DONE, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		(void) !write(slot->done_fd, &one, sizeof(one));
	else
		__atomic_store_n(&slot->state, LACHESIS_SLOT_STALE,
				 __ATOMIC_RELEASE);
	pthread_mutex_lock(&fake.lock);
	fake.finished++;
	pthread_cond_broadcast(&fake.cond);
	pthread_mutex_unlock(&fake.lock);
}

static void *_fake_sizer(void *arg)
{
	size_handoff_t *h = arg;

	for (;;) {
		struct pollfd p = { .fd = h->ask_fd, .events = POLLIN };
		uint64_t v;

		poll(&p, 1, 50);
		pthread_mutex_lock(&fake.lock);
		if (fake.stop) {
			pthread_mutex_unlock(&fake.lock);
			return NULL;
		}
		pthread_mutex_unlock(&fake.lock);
		if (read(h->ask_fd, &v, sizeof(v)) != sizeof(v))
			continue;
		for (int i = 0; i < SIZE_HANDOFF_SLOTS; i++)
			_serve(h, i);
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
	fake.sizing_ms = 0;
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

/* Takes a slot and asks for the job named name within wait_ms. */
static int _ask_named(size_handoff_t *h, const char *name, int wait_ms,
		      lachesis_sizing_t *out, int *rc)
{
	int64_t deadline = size_handoff_deadline(wait_ms);
	int why = -1, i = size_handoff_acquire(h, deadline, &why);

	if (i < 0)
		return why;
	h->slots[i].req.name = strdup(name);
	return size_handoff_ask(h, i, deadline, out, rc);
}

static int _ask(size_handoff_t *h, int wait_ms, lachesis_sizing_t *out,
		int *rc)
{
	return _ask_named(h, "job-3", wait_ms, out, rc);
}

static bool _all_idle(size_handoff_t *h)
{
	for (int i = 0; i < SIZE_HANDOFF_SLOTS; i++)
		if (_state(h, i) != LACHESIS_SLOT_IDLE || h->taken[i])
			return false;
	return true;
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
	CHECK(_clears() == 1);
	CHECK(_all_idle(&h));
	_close(&h, true);
}

/* The plugin's timeout: the sizer is still at work when the wait ends. */
static void test_timeout_while_sizing_leaves_job_and_recovers(void)
{
	size_handoff_t h = SIZE_HANDOFF_INIT;
	lachesis_sizing_t out = { 0 };
	int rc = -1, why = -1, stuck = -1;
	int64_t t0;

	_open(&h, true);
	_gate(false);
	CHECK(_ask(&h, 50, &out, &rc) == HANDOFF_TIMEOUT);
	CHECK(out.action == 0 && rc == -1);	/* nothing copied out */
	for (int i = 0; i < SIZE_HANDOFF_SLOTS; i++)
		if (_state(&h, i) == LACHESIS_SLOT_ABANDONED)
			stuck = i;
	CHECK(stuck >= 0);
	CHECK(_clears() == 0);	/* the sizer may still read the request */

	/* While the one goroutine is stuck in it, the next job does not
	 * wait for a sizing that would come after it. */
	t0 = _ms();
	CHECK(size_handoff_acquire(&h, size_handoff_deadline(5000),
				   &why) < 0 && why == HANDOFF_TIMEOUT);
	CHECK(_ms() - t0 < 1000);	/* not its 5 s: at once, give or take a busy machine */

	/* Once sized, nobody takes its answer; the slot's next user frees
	 * it (every slot is tried, the stale one among them). */
	_gate(true);
	_wait_finished(1);
	CHECK(_state(&h, stuck) == LACHESIS_SLOT_STALE);
	CHECK(_clears() == 0);
	for (int i = 0; i < SIZE_HANDOFF_SLOTS; i++) {
		out.cpus_per_gpu = 0;
		CHECK(_ask(&h, PLUGIN_WAIT_MS, &out, &rc) == HANDOFF_DONE);
		CHECK(rc == LACHESIS_OK && out.cpus_per_gpu == 3);
	}
	CHECK(_state(&h, stuck) == LACHESIS_SLOT_IDLE);
	CHECK(_clears() == SIZE_HANDOFF_SLOTS + 1);
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
	CHECK(_clears() == 1);
	CHECK(_all_idle(&h));
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
	for (int i = 0; i < SIZE_HANDOFF_SLOTS; i++)
		CHECK(write(h.slots[i].done_fd, &one, sizeof(one)) ==
		      sizeof(one));
	CHECK(_ask(&h, 20, &out, &rc) == HANDOFF_TIMEOUT);
	CHECK(rc == -1);
	_close(&h, false);
}

static void test_no_sizer_reports_off(void)
{
	size_handoff_t h = SIZE_HANDOFF_INIT;
	int why = -1;

	CHECK(size_handoff_acquire(&h, size_handoff_deadline(10), &why) < 0 &&
	      why == HANDOFF_OFF);
}

/* Every slot held by a thread that has not asked yet: a further thread
 * waits for one only until its deadline. */
static void test_no_free_slot_waits_only_until_the_deadline(void)
{
	size_handoff_t h = SIZE_HANDOFF_INIT;
	int held[SIZE_HANDOFF_SLOTS], why = -1;
	int64_t t0;

	_open(&h, true);
	for (int i = 0; i < SIZE_HANDOFF_SLOTS; i++) {
		held[i] = size_handoff_acquire(&h, size_handoff_deadline(10),
					       &why);
		CHECK(held[i] >= 0);
	}
	t0 = _ms();
	CHECK(size_handoff_acquire(&h, size_handoff_deadline(60), &why) < 0 &&
	      why == HANDOFF_TIMEOUT);
	CHECK(_ms() - t0 >= 55 && _ms() - t0 < 1000);
	for (int i = 0; i < SIZE_HANDOFF_SLOTS; i++) {
		lachesis_sizing_t out = { 0 };
		int rc = -1;

		if (held[i] < 0)
			continue;
		h.slots[held[i]].req.name = strdup("job-1");
		CHECK(size_handoff_ask(&h, held[i], size_handoff_deadline(
				PLUGIN_WAIT_MS), &out, &rc) == HANDOFF_DONE);
	}
	CHECK(_all_idle(&h));
	_close(&h, true);
}

/* Slurm 23.02 on: many RPC threads at once, more than there are slots. */
struct asker {
	size_handoff_t *h;
	int id, rounds, wait_ms;
	int done, timeouts, wrong;
	int64_t longest_ms;	/* the longest any one ask took */
};

static void *_asker(void *arg)
{
	struct asker *a = arg;

	for (int r = 0; r < a->rounds; r++) {
		lachesis_sizing_t out = { 0 };
		char name[32];
		int rc = -1, res;
		uint32_t want = 1000 * (a->id + 1) + r;
		int64_t t0 = _ms(), took;

		snprintf(name, sizeof(name), "job-%u", want);
		res = _ask_named(a->h, name, a->wait_ms, &out, &rc);
		took = _ms() - t0;
		if (took > a->longest_ms)
			a->longest_ms = took;
		if (res == HANDOFF_DONE) {
			a->done++;
			if (rc != LACHESIS_OK || out.cpus_per_gpu != want)
				a->wrong++;
		} else {
			a->timeouts++;
		}
	}
	return NULL;
}

#define ASKERS (3 * SIZE_HANDOFF_SLOTS)

/* What ASKERS threads asking rounds jobs each, waiting wait_ms per job,
 * got all together. */
struct tally {
	int done, wrong, timeouts;
	int64_t longest_ms;
};

static struct tally _run_askers(size_handoff_t *h, int rounds, int wait_ms)
{
	struct asker a[ASKERS];
	pthread_t t[ASKERS];
	struct tally sum = { 0 };

	for (int i = 0; i < ASKERS; i++) {
		a[i] = (struct asker) { .h = h, .id = i, .rounds = rounds,
					.wait_ms = wait_ms };
		pthread_create(&t[i], NULL, _asker, &a[i]);
	}
	for (int i = 0; i < ASKERS; i++) {
		pthread_join(t[i], NULL);
		sum.done += a[i].done;
		sum.wrong += a[i].wrong;
		sum.timeouts += a[i].timeouts;
		if (a[i].longest_ms > sum.longest_ms)
			sum.longest_ms = a[i].longest_ms;
	}
	return sum;
}

/* Each thread gets its own job's answer, every request is freed once. */
static void test_concurrent_askers_each_get_their_own_answer(void)
{
	size_handoff_t h = SIZE_HANDOFF_INIT;
	struct tally got;

	_open(&h, true);
	got = _run_askers(&h, 200, PLUGIN_WAIT_MS);
	CHECK(got.wrong == 0);
	CHECK(got.timeouts == 0);
	CHECK(got.done == ASKERS * 200);
	CHECK(_clears() == ASKERS * 200);
	CHECK(_all_idle(&h));
	_close(&h, true);
}

/* A slow sizer (40 ms a job) and more askers than it can answer within
 * their wait: no thread waits past its own deadline, for a slot or for
 * the answer, and the answers that come are still each thread's own. */
static void test_slow_sizer_never_keeps_a_thread_past_its_deadline(void)
{
	size_handoff_t h = SIZE_HANDOFF_INIT;
	struct tally got;

	_open(&h, true);
	pthread_mutex_lock(&fake.lock);
	fake.sizing_ms = 40;
	pthread_mutex_unlock(&fake.lock);
	got = _run_askers(&h, 1, 200);
	CHECK(got.wrong == 0);
	CHECK(got.done > 0 && got.timeouts > 0 &&
	      got.done + got.timeouts == ASKERS);
	/* 200 ms, and the slack of a busy machine's scheduler (the one-slot
	 * hand-off this replaced kept the last of them 1994 ms) */
	CHECK(got.longest_ms <= 200 + 600);
	printf("size_handoff: slow sizer: %d answered, %d left as submitted, longest wait %lld ms\n",
	       got.done, got.timeouts, (long long) got.longest_ms);
	_close(&h, true);
}

int main(void)
{
	test_answer_in_time_is_returned_and_freed();
	test_timeout_while_sizing_leaves_job_and_recovers();
	test_timeout_never_picked_up_takes_request_back();
	test_stale_done_signal_is_not_an_answer();
	test_no_sizer_reports_off();
	test_no_free_slot_waits_only_until_the_deadline();
	test_concurrent_askers_each_get_their_own_answer();
	test_slow_sizer_never_keeps_a_thread_past_its_deadline();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("size_handoff: all tests passed\n");
	return 0;
}
