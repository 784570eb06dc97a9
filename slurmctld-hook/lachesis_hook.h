/*
 * lachesis_hook.h - C helpers shared by Lachesis's slurmctld plugins.
 *
 * They copy fields out of Slurm's records into the flat structs of
 * lachesis_core.h and route the core's log lines into slurmctld's log.
 * No policy lives here: every decision is made by the Go core.
 */
#ifndef LACHESIS_HOOK_H
#define LACHESIS_HOOK_H

#include "lachesis_core.h"
#include "slurm_compat.h"

/* A plugin's init(): takes a reference on the Go core, once per plugin
 * (*up says whether it holds one) and only inside slurmctld: sshare and
 * other clients load plugins too, and must not start anything. Logs and
 * returns SLURM_ERROR on a bad config, naming the offending key. */
extern int lachesis_hook_start(const char *plugin, bool *up);

/* A plugin's fini(): drops its reference, if it holds one. */
extern void lachesis_hook_stop(bool *up);

/* Index of gres/gpu in the TRES arrays, or -1 when it is not tracked. */
extern int lachesis_hook_gpu_tres_pos(void);

/* Copies what the core needs of one job. Caller holds the job read lock. */
/* Replaces Lachesis's part of the job's SystemComment with marker (keeping
 * any other text); caller holds the job write lock. False when the comment
 * is too long to touch. */
extern bool lachesis_hook_set_marker(job_record_t *job_ptr, const char *marker);

/* Replaces one of Lachesis's segments of the job's AdminComment (from
 * prefix through the next ']': LACHESIS_USAGE_PREFIX, the GPU use;
 * LACHESIS_QUOTA_PREFIX, the quota state) with segment, or appends it;
 * the rest of the comment (Synergy's sizing reason, an admin's text, the
 * other segment) stays. Caller holds the job write lock. False when
 * segment is not one segment starting with prefix or the comment is too
 * long to touch. */
extern bool lachesis_hook_set_segment(job_record_t *job_ptr, const char *prefix,
				      const char *segment);

extern void lachesis_hook_fill_job(job_record_t *job_ptr, int gpu_pos,
				   lachesis_job_t *out);

/* Copies the job's allocated CPUs and its first node's CPUs and GPUs (for
 * charging jobs without GPUs), and the GPU type, name and comment its run
 * is weighted by under effective service (pointers into the job and node
 * records, valid while the locks are held). Running, suspended and
 * finished jobs only; caller holds the job and node read locks. */
extern void lachesis_hook_fill_alloc(job_record_t *job_ptr,
				     lachesis_job_t *out);

/* Writes the indexes of the job's nodes (at most cap) into out and
 * returns how many; caller holds the job and node read locks. */
extern int lachesis_hook_job_nodes(job_record_t *job_ptr, int32_t *out,
				   int cap);

/* Shares of the job's account from its association, 0 for none (no
 * slurmdbd, no association, shares unset or "parent"). Caller holds the
 * job read lock and assoc_mgr's assoc read lock. */
extern uint32_t lachesis_hook_account_shares(job_record_t *job_ptr);

/* Appends reason ("" = nothing) to the AdminComment being built in
 * *comment, after "; " when it has text already, cleaned by
 * reason_text.h's rule: keep_marker when the reason ends with Lachesis's
 * sizing marker. */
extern void lachesis_hook_append_reason(char **comment, const char *reason,
					bool keep_marker);

/* The log callback handed to the core. */
extern void lachesis_hook_log(int level, const char *msg);

#endif
