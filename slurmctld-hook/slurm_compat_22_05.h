/*
 * slurm_compat_22_05.h - Slurm 22.05 (Debian 12), as slurm_compat.h
 * describes. Include slurm_compat.h, never this file.
 */
#ifndef LACHESIS_SLURM_COMPAT_22_05_H
#define LACHESIS_SLURM_COMPAT_22_05_H

#include "src/common/gres.h"
#include "src/common/list.h"
#include "src/common/select.h"
#include "src/common/slurm_priority.h"
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"
#include "src/slurmctld/locks.h"
#include "src/slurmctld/preempt.h"
#include "src/slurmctld/slurmctld.h"

/* 24.11's names (list.h's List and ListIterator are pointers to these). */
typedef struct xlist list_t;
typedef struct listIterator list_itr_t;
typedef struct job_details job_details_t;

#define LACHESIS_GRES_PREFIX "gres:"

static inline void lachesis_job_drop_priority_array(job_record_t *job_ptr)
{
	xfree(job_ptr->priority_array);
}

/* After update_job changed a pending job's GRES request: 22.05 keeps no
 * other copy of it. */
static inline void lachesis_job_gres_updated(job_record_t *job_ptr)
{
}

/* job_modify(job_desc, job_ptr, submit_uid): no message for the user. */
#define LACHESIS_JOB_MODIFY(fn)                                              \
	extern int job_modify(job_desc_msg_t *job_desc, job_record_t *job_ptr, \
			      uint32_t submit_uid)                           \
	{                                                                    \
		return fn(job_desc, job_ptr, submit_uid, NULL);              \
	}

/* The factors sit in the object itself. */
typedef priority_factors_object_t lachesis_factors_t;

/* Where sprio row obj of job_ptr keeps its factors, and what else of the
 * job's it carries: nothing more in 22.05. */
static inline lachesis_factors_t *
lachesis_factors_of(priority_factors_object_t *obj, job_record_t *job_ptr)
{
	return obj;
}

/* Whether list (of uint32_t), if any, holds value. */
static inline bool lachesis_sprio_listed(list_t *list, uint32_t value)
{
	uint32_t *id;
	bool hit = false;
	list_itr_t *itr;

	if (!list)
		return true;
	itr = list_iterator_create(list);
	while (!hit && (id = list_next(itr)))
		hit = (*id == value);
	list_iterator_destroy(itr);
	return hit;
}

/* sprio's filter (jobs, users, partitions), which 22.05 applies in
 * slurmctld: the request is handed to the plugin. */
static inline bool lachesis_sprio_wanted(job_record_t *job_ptr, void *arg)
{
	priority_factors_request_msg_t *req = arg;
	char *part_list, *tok, *save = NULL;
	bool hit;

	if (!lachesis_sprio_listed(req->job_id_list, job_ptr->job_id) ||
	    !lachesis_sprio_listed(req->uid_list, job_ptr->user_id))
		return false;
	if (req->partitions) {
		hit = false;
		part_list = xstrdup(req->partitions);
		for (tok = strtok_r(part_list, ",", &save); tok && !hit;
		     tok = strtok_r(NULL, ",", &save))
			hit = job_ptr->partition &&
			      xstrstr(job_ptr->partition, tok);
		xfree(part_list);
		if (!hit)
			return false;
	}
	return true;
}

/* sprio: 22.05 calls the plugin without locks and with the filter;
 * list_fn(uid, wanted, arg) builds the rows under the job read lock. */
#define LACHESIS_PRIORITY_FACTORS(list_fn)                                   \
	extern List priority_p_get_priority_factors_list(                    \
		priority_factors_request_msg_t *req_msg, uid_t uid)          \
	{                                                                    \
		slurmctld_lock_t job_read_lock = {                           \
			NO_LOCK, READ_LOCK, READ_LOCK, READ_LOCK, NO_LOCK }; \
		list_t *rows;                                                \
		lock_slurmctld(job_read_lock);                               \
		rows = list_fn(uid, lachesis_sprio_wanted, req_msg);         \
		unlock_slurmctld(job_read_lock);                             \
		return rows;                                                 \
	}

/* 22.05's priority interface has no more entry points. */
#define LACHESIS_PRIORITY_EXTRA

/* `scontrol reconfigure` re-reads the configuration in the running
 * slurmctld (priority_p_reconfig): no slurmctld is ever started to replace
 * another. */
static inline bool lachesis_replaces_a_slurmctld(void)
{
	return false;
}

#endif
