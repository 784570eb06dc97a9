/*
 * preempt_tiresias.c - preempt/tiresias: Tiresias preemption for slurmctld.
 *
 * Tiresias preempts only across queue boundaries: a job may requeue a
 * running job only if the victim has sunk to a lower-priority queue. Within
 * a queue, jobs never preempt each other, whatever their exact priorities;
 * that keeps small priority changes (age, a new pass) from causing churn.
 * The queue of each job is the Go core's decision from its last pass.
 *
 * Use with PreemptMode=REQUEUE: a suspended job would keep its GPUs.
 *
 * Cost: with preemption enabled, Slurm asks for every waiting job it tries
 * (main scheduler and backfill) whether each job in the system is a victim,
 * tries waiting jobs against busy nodes, and the select plugin tests a job
 * again with its victims removed. Two answers keep that work to the jobs
 * that can preempt someone: "enabled" is false while no waiting GPU job
 * sits in a better queue than a running one (the core's view from its last
 * pass), and a job that is not running is never a victim, answered here
 * without calling into the core. Two waiting jobs thus never "preempt"
 * each other in Slurm's queue sort either: they keep priority order, which
 * the Tiresias queue dominates (with the default weights, only it counts).
 */
#include "lachesis_hook.h" /* slurm_compat.h: the release's headers */

#include "src/common/log.h"
#include "src/common/plugin.h"

const char plugin_name[] = "Lachesis Tiresias preemption plugin";
const char plugin_type[] = "preempt/tiresias";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

static bool core_up = false;

extern int init(void)
{
	return lachesis_hook_start(plugin_type, &core_up);
}

extern void fini(void)
{
	lachesis_hook_stop(&core_up);
}

extern bool preempt_p_preemptable(job_record_t *preemptee,
				  job_record_t *preemptor)
{
	if (!core_up || !IS_JOB_RUNNING(preemptee))
		return false;
	return lachesis_preemptable(preemptor->job_id, preemptee->job_id) == 1;
}

extern bool preempt_p_job_preempt_check(job_queue_rec_t *preemptor,
					job_queue_rec_t *preemptee)
{
	return preempt_p_preemptable(preemptee->job_ptr, preemptor->job_ptr);
}

extern int preempt_p_get_data(job_record_t *job_ptr,
			      slurm_preempt_data_type_t data_type, void *data)
{
	switch (data_type) {
	case PREEMPT_DATA_ENABLED:
		/* Slurm asks this without a job (job_ptr is NULL), before
		 * looking for victims and before picking nodes for each job. */
		*(bool *) data = core_up &&
				 (slurm_conf.preempt_mode != PREEMPT_MODE_OFF) &&
				 (lachesis_preemption_possible() == 1);
		return SLURM_SUCCESS;
	case PREEMPT_DATA_MODE:
		*(uint16_t *) data = slurm_conf.preempt_mode &
				     ~(PREEMPT_MODE_GANG | PREEMPT_MODE_WITHIN);
		return SLURM_SUCCESS;
	case PREEMPT_DATA_PRIO:
		/* Victims are taken lowest first, in the core's victim order
		 * (lower queues first; with spread_victims, the jobs of a queue
		 * requeued least first; then the lowest-ranked), which is what
		 * the simulator measures. Without the core: the job's own
		 * priority, which the Tiresias queue dominates. */
		if (!core_up) {
			*(uint32_t *) data = job_ptr->priority;
			return SLURM_SUCCESS;
		}
		*(uint32_t *) data = lachesis_victim_order(job_ptr->job_id,
							   job_ptr->priority);
		return SLURM_SUCCESS;
	case PREEMPT_DATA_GRACE_TIME:
		/* Slurm asks this once per preemption, for the victim, just
		 * before it requeues it (or kills it when it may not be
		 * requeued): the core ends the victim's run now and counts
		 * the preemption, which tells it from a requeue the job's
		 * owner asked for. */
		*(uint32_t *) data = 0;
		if (core_up && job_ptr)
			lachesis_preempting(job_ptr->job_id, time(NULL));
		return SLURM_SUCCESS;
	default:
		error("%s: unknown data type %d", __func__, data_type);
		return SLURM_ERROR;
	}
}
