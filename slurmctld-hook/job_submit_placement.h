/*
 * job_submit_placement.h - the placement half of job_submit/synergy:
 * GPU-type preference (--prefer) and consolidation (max_nodes), decided by
 * the Go core from lachesis.yaml's placement table.
 */
#ifndef LACHESIS_JOB_SUBMIT_PLACEMENT_H
#define LACHESIS_JOB_SUBMIT_PLACEMENT_H

#include "slurm/slurm.h"

/* Called by job_submit() after sizing, with slurmctld's config/job/node/
 * partition READ locks held. May set job_desc->prefer and max_nodes, and
 * appends its reason to the admin comment. Never fails the job. */
extern void lachesis_placement_apply(job_desc_msg_t *job_desc,
				     const char *plugin_type);

#endif
