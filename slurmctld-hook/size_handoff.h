/*
 * size_handoff.h - job_submit/synergy's side of the sizing slot: an RPC
 * thread hands one job to the core's sizing goroutine and waits, bounded,
 * for the answer (lachesis_core.h describes the slot and its states).
 *
 * Nothing here knows Slurm or calls the Go core, so it is tested on its own
 * (size_handoff_test.c) against a stand-in for the goroutine.
 */
#ifndef SIZE_HANDOFF_H
#define SIZE_HANDOFF_H

#include <pthread.h>
#include <stdbool.h>

#include "lachesis_core.h"

/* What size_handoff_acquire and size_handoff_ask report. */
#define HANDOFF_DONE    0	/* the answer is in *out and *rc */
#define HANDOFF_TIMEOUT 1	/* no answer in time: leave the job as it is */
#define HANDOFF_OFF     2	/* no sizing goroutine: size some other way */

/* Initialise with SIZE_HANDOFF_INIT. */
typedef struct size_handoff {
	pthread_mutex_t lock;	/* one asker at a time; guards running */
	lachesis_size_slot_t slot;
	int ask_fd, done_fd;	/* eventfds, -1 when closed */
	bool running;		/* set by the owner once the sizer started */
	/* Frees what the owner put into slot->req and slot->nodes. */
	void (*clear)(lachesis_size_slot_t *slot);
} size_handoff_t;

#define SIZE_HANDOFF_INIT \
	{ .lock = PTHREAD_MUTEX_INITIALIZER, .ask_fd = -1, .done_fd = -1 }

/* Creates the two eventfds (non-blocking). False, with errno, on failure. */
extern bool size_handoff_open(size_handoff_t *h,
			      void (*clear)(lachesis_size_slot_t *slot));

/* Locks h and returns its slot, idle, for the caller to fill and pass to
 * size_handoff_ask. NULL, unlocked, with *why set when there is none:
 * HANDOFF_OFF when no sizer runs, HANDOFF_TIMEOUT when a job an earlier
 * caller gave up on is still being sized (waiting for it again would only
 * stall another RPC). */
extern lachesis_size_slot_t *size_handoff_acquire(size_handoff_t *h,
						  int *why);

/* Hands the filled slot to the sizer and waits up to wait_ms for the
 * answer; then unlocks h. HANDOFF_DONE (answer copied to *out, *rc) or
 * HANDOFF_TIMEOUT. Either way the request is the handoff's to free. */
extern int size_handoff_ask(size_handoff_t *h, int wait_ms,
			    lachesis_sizing_t *out, int *rc);

/* Frees the slot's request and closes the eventfds; only once no sizer
 * can touch them any more. */
extern void size_handoff_close(size_handoff_t *h);

#endif
