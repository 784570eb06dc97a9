/*
 * size_handoff.h - job_submit/synergy's side of the sizing slots: an RPC
 * thread hands one job to the core's sizing goroutine and waits, bounded,
 * for the answer (lachesis_core.h describes a slot and its states).
 *
 * From Slurm 23.02 slurmctld calls job_submit on several RPC threads at
 * once (src/interfaces/job_submit.c takes its plugin lock for reading;
 * 22.05 took a mutex around every call). So there are several slots: each
 * thread takes one of its own, fills it and polls its own done eventfd, and
 * the goroutine serves every asked slot. A thread never waits past its
 * deadline, for a slot or for the answer; the mutex guards only which slots
 * are taken and is never held while waiting for the core.
 *
 * Nothing here knows Slurm or calls the Go core, so it is tested on its own
 * (size_handoff_test.c) against a stand-in for the goroutine.
 */
#ifndef SIZE_HANDOFF_H
#define SIZE_HANDOFF_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "lachesis_core.h"

/* What size_handoff_acquire and size_handoff_ask report. */
#define HANDOFF_DONE    0	/* the answer is in *out and *rc */
#define HANDOFF_TIMEOUT 1	/* no answer in time: leave the job as it is */
#define HANDOFF_OFF     2	/* no sizing goroutine: size some other way */

/* Slots: more RPC threads than this at once wait for one to come free.
 * Sizing takes tens of microseconds, so a slot frees quickly; the count
 * only has to cover a burst of submissions. */
#define SIZE_HANDOFF_SLOTS 16

/* Initialise with SIZE_HANDOFF_INIT. */
typedef struct size_handoff {
	pthread_mutex_t lock;	/* guards taken[] and running */
	pthread_cond_t freed;	/* a slot was given back (CLOCK_MONOTONIC) */
	bool cond_ready;	/* freed is initialised */
	/* Handed to the sizer as one array; slots[i].done_fd is slot i's. */
	lachesis_size_slot_t slots[SIZE_HANDOFF_SLOTS];
	bool taken[SIZE_HANDOFF_SLOTS];	/* an RPC thread holds slot i */
	int ask_fd;		/* eventfd, -1 when closed */
	bool running;		/* set by the owner once the sizer started */
	/* Frees what the owner put into slots[i] (its request, nodes). */
	void (*clear)(struct size_handoff *h, int i);
} size_handoff_t;

#define SIZE_HANDOFF_INIT \
	{ .lock = PTHREAD_MUTEX_INITIALIZER, .ask_fd = -1 }

/* Creates the eventfds (non-blocking): the shared ask one and each slot's
 * done one. False, with errno, on failure (nothing left open). */
extern bool size_handoff_open(size_handoff_t *h,
			      void (*clear)(size_handoff_t *h, int i));

/* The deadline, on size_handoff's clock, wait_ms from now. */
extern int64_t size_handoff_deadline(int wait_ms);

/* Takes an idle slot for the caller, waiting until deadline for one, and
 * returns its index, for the caller to fill h->slots[i] and pass to
 * size_handoff_ask. -1 with *why set when there is none: HANDOFF_OFF when
 * no sizer runs; HANDOFF_TIMEOUT at once while the sizer is still at a job
 * an earlier caller gave up on (it sizes one job at a time: waiting behind
 * it would only stall another RPC), or when no slot came free by the
 * deadline. */
extern int size_handoff_acquire(size_handoff_t *h, int64_t deadline,
				int *why);

/* Hands slot i to the sizer and waits until deadline for the answer, then
 * gives the slot back. HANDOFF_DONE (answer copied to *out, *rc) or
 * HANDOFF_TIMEOUT. Either way the request is the handoff's to free. */
extern int size_handoff_ask(size_handoff_t *h, int i, int64_t deadline,
			    lachesis_sizing_t *out, int *rc);

/* Frees every slot's request and closes the eventfds; only once no sizer
 * and no RPC thread can touch them any more. */
extern void size_handoff_close(size_handoff_t *h);

#endif
