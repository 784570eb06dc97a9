/*
 * job_submit_synergy.c - job_submit/synergy: CPUs and memory per GPU from
 * each model's profile (Synergy, OSDI'22), decided by the Go core.
 *
 * Called with slurmctld's config/job/node/partition READ locks held: it only
 * reads the partition's nodes, makes one call, and edits the job request.
 * The decision's reason goes into the job's admin comment, so
 * `scontrol show job` says why a job got its CPUs and memory.
 */
#include <inttypes.h>
#include <string.h>

#include "slurm/slurm.h"
#include "slurm/slurm_errno.h"
#include "src/common/bitstring.h"
#include "src/common/log.h"
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"
#include "src/slurmctld/slurmctld.h"

#include "lachesis_hook.h"

const char plugin_name[] = "Lachesis Synergy job_submit plugin";
const char plugin_type[] = "job_submit/synergy";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

static bool core_up = false;

extern int init(void)
{
	return lachesis_hook_start(plugin_type, &core_up);
}

extern int fini(void)
{
	lachesis_hook_stop(&core_up);
	return SLURM_SUCCESS;
}

/* The job's partition: the first of a comma-separated list, else the
 * default partition. */
static part_record_t *_job_partition(const char *names)
{
	char *first, *comma;
	part_record_t *part_ptr;

	if (!names || !names[0])
		return default_part_loc;
	first = xstrdup(names);
	if ((comma = strchr(first, ',')))
		*comma = '\0';
	part_ptr = find_part_record(first);
	xfree(first);
	return part_ptr;
}

/* Copies the partition's nodes into a new array; caller xfrees it. */
static lachesis_node_t *_partition_nodes(part_record_t *part_ptr, int *count)
{
	lachesis_node_t *nodes;
	int n = 0, first, last;

	*count = 0;
	if (!part_ptr || !part_ptr->node_bitmap)
		return NULL;
	first = bit_ffs(part_ptr->node_bitmap);
	last = bit_fls(part_ptr->node_bitmap);
	if (first < 0)
		return NULL;
	nodes = xcalloc(last - first + 1, sizeof(*nodes));
	for (int i = first; i <= last; i++) {
		node_record_t *node_ptr;

		if (!bit_test(part_ptr->node_bitmap, i) ||
		    !(node_ptr = node_record_table_ptr[i]))
			continue;
		nodes[n].cpus = node_ptr->cpus;
		nodes[n].mem_mb = node_ptr->real_memory;
		nodes[n].gres = node_ptr->gres ? node_ptr->gres :
			(node_ptr->config_ptr ? node_ptr->config_ptr->gres :
						NULL);
		n++;
	}
	*count = n;
	return nodes;
}

static void _note_reason(job_desc_msg_t *job_desc, const char *reason)
{
	if (!reason[0])
		return;
	if (job_desc->admin_comment && job_desc->admin_comment[0])
		xstrfmtcat(job_desc->admin_comment, "; %s", reason);
	else {
		xfree(job_desc->admin_comment);
		job_desc->admin_comment = xstrdup(reason);
	}
}

extern int job_submit(job_desc_msg_t *job_desc, uint32_t submit_uid,
		      char **err_msg)
{
	lachesis_submit_t req;
	lachesis_sizing_t out;
	lachesis_node_t *nodes;
	int n, rc;

	if (!core_up)
		return SLURM_SUCCESS;
	memset(&req, 0, sizeof(req));
	req.user_id = job_desc->user_id;
	req.name = job_desc->name;
	req.comment = job_desc->comment;
	req.partition = job_desc->partition;
	req.tres_per_job = job_desc->tres_per_job;
	req.tres_per_node = job_desc->tres_per_node;
	req.tres_per_socket = job_desc->tres_per_socket;
	req.tres_per_task = job_desc->tres_per_task;
	req.cpus_per_tres = job_desc->cpus_per_tres;
	req.mem_per_tres = job_desc->mem_per_tres;
	if (job_desc->cpus_per_task != NO_VAL16)
		req.cpus_per_task = job_desc->cpus_per_task;
	if (job_desc->min_nodes != NO_VAL)
		req.min_nodes = job_desc->min_nodes;
	if (job_desc->num_tasks != NO_VAL)
		req.num_tasks = job_desc->num_tasks;
	if (job_desc->pn_min_memory != NO_VAL64) {
		req.mem_per_cpu = (job_desc->pn_min_memory & MEM_PER_CPU) ? 1 : 0;
		req.mem_mb = job_desc->pn_min_memory & ~MEM_PER_CPU;
	}

	nodes = _partition_nodes(_job_partition(job_desc->partition), &n);
	rc = lachesis_size_job(&req, nodes, n, &out);
	xfree(nodes);
	if (rc != LACHESIS_OK) {
		/* A Lachesis failure must not cost the user their job. */
		error("%s: sizing failed (code %d); job left as submitted",
		      plugin_type, rc);
		return SLURM_SUCCESS;
	}

	switch (out.action) {
	case LACHESIS_SIZE_REJECT:
		*err_msg = xstrdup(out.error);
		info("%s: refused a job of uid %u: %s", plugin_type,
		     submit_uid, out.error);
		return ESLURM_INVALID_GRES;
	case LACHESIS_SIZE_SET:
		if (out.cpus_per_gpu) {
			xfree(job_desc->cpus_per_tres);
			xstrfmtcat(job_desc->cpus_per_tres, "gres:gpu:%u",
				   out.cpus_per_gpu);
			if (out.clear_cpus_per_task)
				job_desc->cpus_per_task = NO_VAL16;
		}
		if (out.mem_mb_per_gpu) {
			xfree(job_desc->mem_per_tres);
			xstrfmtcat(job_desc->mem_per_tres, "gres:gpu:%" PRIu64,
				   out.mem_mb_per_gpu);
			if (out.clear_mem)
				job_desc->pn_min_memory = NO_VAL64;
		}
		break;
	default:
		break;
	}
	_note_reason(job_desc, out.reason);
	debug("%s: %s", plugin_type, out.reason);
	return SLURM_SUCCESS;
}

extern int job_modify(job_desc_msg_t *job_desc, job_record_t *job_ptr,
		      uint32_t submit_uid)
{
	/* Sizing happens once, at submit; updates (including Lachesis's own
	 * fallback shrink) go through unchanged. */
	return SLURM_SUCCESS;
}
