/*
 * slurm_compat_24_11.h - Slurm 24.11 (Debian 13), as slurm_compat.h
 * describes. Include slurm_compat.h, never this file.
 */
#ifndef LACHESIS_SLURM_COMPAT_24_11_H
#define LACHESIS_SLURM_COMPAT_24_11_H

#include "src/common/list.h"
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"
#include "src/interfaces/gres.h"
#include "src/interfaces/preempt.h"
#include "src/interfaces/priority.h"
#include "src/interfaces/select.h"
#include "src/slurmctld/locks.h"
#include "src/slurmctld/slurmctld.h"

#define LACHESIS_GRES_PREFIX "gres/"

static inline void lachesis_job_drop_priority_array(job_record_t *job_ptr)
{
	if (job_ptr->part_prio)
		xfree(job_ptr->part_prio->priority_array);
}

/* After update_job changed a pending job's GRES request (cpus_per_tres,
 * mem_per_tres): select/cons_tres keeps the request it last tried the job
 * with in gres_list_req_accum (rebuilt only when NULL, job_test.c), and
 * update_job replaces gres_list_req without dropping it, so the job would
 * go on being tried with its old CPUs per GPU and wait for them forever.
 * Dropping it makes the next try rebuild it from the new request. */
static inline void lachesis_job_gres_updated(job_record_t *job_ptr)
{
	FREE_NULL_LIST(job_ptr->gres_list_req_accum);
}

/* job_modify(job_desc, job_ptr, submit_uid, err_msg): from 23.02 a plugin
 * may answer the user (err_msg, freed by Slurm with xfree). */
#define LACHESIS_JOB_MODIFY(fn)                                              \
	extern int job_modify(job_desc_msg_t *job_desc, job_record_t *job_ptr, \
			      uint32_t submit_uid, char **err_msg)           \
	{                                                                    \
		return fn(job_desc, job_ptr, submit_uid, err_msg);           \
	}

/* The factors sit in a priority_factors_t the object points to (23.02). */
typedef priority_factors_t lachesis_factors_t;

/* Where sprio row obj of job_ptr keeps its factors (a priority_factors_t
 * of its own), and the job's account and QOS, which 24.11's sprio shows.
 * Freed with the row by slurm_destroy_priority_factors_object. */
static inline lachesis_factors_t *
lachesis_factors_of(priority_factors_object_t *obj, job_record_t *job_ptr)
{
	obj->account = xstrdup(job_ptr->account);
	if (job_ptr->qos_ptr)
		obj->qos = xstrdup(job_ptr->qos_ptr->name);
	obj->prio_factors = xmalloc(sizeof(*obj->prio_factors));
	return obj->prio_factors;
}

/* sprio: from 23.02 slurmctld holds the job, node and partition read locks
 * (and assoc_mgr's QOS read lock) and sprio filters the rows itself. */
#define LACHESIS_PRIORITY_FACTORS(list_fn)                                   \
	extern list_t *priority_p_get_priority_factors_list(uid_t uid)        \
	{                                                                    \
		return list_fn(uid, NULL, NULL);                             \
	}

/*
 * 23.02's two more entry points. priority_p_recover: after slurmctld
 * recovered its jobs, priority/basic raises every priority so its
 * decreasing counter cannot reach 0; Lachesis's priorities are ranks the
 * next pass sets again, so nothing is raised (0). priority_p_thread_start:
 * called once the jobs are loaded, where priority/multifactor starts its
 * decay thread; the Tiresias pass thread starts in init() on every
 * release, and sleeps a pass interval before its first pass.
 */
/* From 24.05 `scontrol reconfigure` starts a new slurmctld (fork and exec)
 * beside the running one, which stops its priority plugin, waits with its
 * listeners open and exits once the new one is up, or goes on if it fails
 * (controller.c, _try_to_reconfig); the new one finds SLURMCTLD_RECONF in
 * its environment. priority_p_reconfig is never called. */
static inline bool lachesis_replaces_a_slurmctld(void)
{
	return getenv("SLURMCTLD_RECONF") != NULL;
}

#define LACHESIS_PRIORITY_EXTRA                                              \
	extern uint32_t priority_p_recover(uint32_t prio_boost)             \
	{                                                                    \
		return 0;                                                    \
	}                                                                    \
	extern void priority_p_thread_start(void)                           \
	{                                                                    \
	}

#endif
