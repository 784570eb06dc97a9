/*
 * job_submit_synergy.c - job_submit/synergy: CPUs and memory per GPU from
 * each model's profile (Synergy, OSDI'22), decided by the Go core.
 *
 * Called with slurmctld's config/job/node/partition READ locks held: it only
 * reads the partition's nodes (a cached summary), makes one call, and edits
 * the job request. Jobs that ask for no GPU never reach the core.
 * The decision's reason goes into the job's admin comment, so
 * `scontrol show job` says why a job got its CPUs and memory.
 */
#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "slurm/slurm.h"
#include "slurm/slurm_errno.h"
#include "src/common/bitstring.h"
#include "src/common/log.h"
#include "src/common/macros.h"
#include "src/common/strlcpy.h"
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"
#include "src/slurmctld/slurmctld.h"

#include "lachesis_hook.h"
#include "job_submit_placement.h"

const char plugin_name[] = "Lachesis Synergy job_submit plugin";
const char plugin_type[] = "job_submit/synergy";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

static bool core_up = false;

static void _drop_summary(void);

extern int init(void)
{
	return lachesis_hook_start(plugin_type, &core_up);
}

extern int fini(void)
{
	lachesis_hook_stop(&core_up);
	_drop_summary();
	return SLURM_SUCCESS;
}

/*
 * The nodes a job may run on, summarised for the core.
 *
 * Partition rule: no partition means slurmctld's default partition (the
 * one _get_job_parts() in job_mgr.c assigns later, after job_submit runs);
 * a comma-separated list means every node of every listed partition that
 * exists. Slurm starts the job in whichever listed partition can run it,
 * so the proportional share is the smallest over all of them (safe
 * wherever it lands) and the best case is used if some node of any of
 * them holds it. Unknown names are skipped here; slurmctld refuses them
 * itself. (A job with --reservation and no partition gets the default
 * partition here, not the reservation's.)
 *
 * The summary is cached, keyed by the partition string and by
 * last_node_update/last_part_update, which slurmctld bumps on every change
 * of a node or partition record (including a node's gres); we are called
 * with the node and partition read locks held, so neither moves under us.
 * The gres pointers point into node records and are valid as long as the
 * key matches. Several RPC threads may be here at once (read locks), so
 * the cache has its own mutex, held only to look up or refill it.
 */
#define SUMMARY_NAME_MAX 1024	/* slurmctld refuses longer partitions */

static pthread_mutex_t summary_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	bool valid;
	char key[SUMMARY_NAME_MAX + 1];	/* the partition string as given */
	time_t node_update, part_update;
	char name[SUMMARY_NAME_MAX + 1];	/* resolved, for the core */
	lachesis_node_t *nodes;
	int n, cap;
} summary;

static void _drop_summary(void)
{
	slurm_mutex_lock(&summary_lock);
	xfree(summary.nodes);
	memset(&summary, 0, sizeof(summary));
	slurm_mutex_unlock(&summary_lock);
}

/* Adds part_ptr's nodes to *nodes_bitmap. */
static void _add_part(bitstr_t **nodes_bitmap, part_record_t *part_ptr)
{
	if (!part_ptr || !part_ptr->node_bitmap)
		return;
	if (!*nodes_bitmap)
		*nodes_bitmap = bit_copy(part_ptr->node_bitmap);
	else
		bit_or(*nodes_bitmap, part_ptr->node_bitmap);
}

/* Refills the summary for partition string key (NULL: the default). */
static void _fill_summary(const char *key)
{
	bitstr_t *nodes_bitmap = NULL;
	int first, last, n = 0;

	summary.valid = false;
	summary.n = 0;
	summary.name[0] = '\0';
	if (!key || !key[0]) {
		_add_part(&nodes_bitmap, default_part_loc);
		if (default_part_loc && default_part_loc->name)
			strlcpy(summary.name, default_part_loc->name,
				sizeof(summary.name));
	} else {
		char *names = xstrdup(key), *save = NULL, *tok;

		for (tok = strtok_r(names, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save))
			_add_part(&nodes_bitmap, find_part_record(tok));
		xfree(names);
		strlcpy(summary.name, key, sizeof(summary.name));
	}
	if (nodes_bitmap && (first = bit_ffs(nodes_bitmap)) >= 0) {
		last = bit_fls(nodes_bitmap);
		if (summary.cap < last - first + 1) {
			summary.cap = last - first + 1;
			xrecalloc(summary.nodes, summary.cap,
				  sizeof(*summary.nodes));
		}
		for (int i = first; i <= last; i++) {
			node_record_t *node_ptr;

			if (!bit_test(nodes_bitmap, i) ||
			    !(node_ptr = node_record_table_ptr[i]))
				continue;
			summary.nodes[n].cpus = node_ptr->cpus;
			summary.nodes[n].reserved = 0;
			summary.nodes[n].mem_mb = node_ptr->real_memory;
			summary.nodes[n].gres = node_ptr->gres ? node_ptr->gres :
				(node_ptr->config_ptr ?
				 node_ptr->config_ptr->gres : NULL);
			n++;
		}
	}
	FREE_NULL_BITMAP(nodes_bitmap);
	summary.n = n;
	strlcpy(summary.key, key ? key : "", sizeof(summary.key));
	summary.node_update = last_node_update;
	summary.part_update = last_part_update;
	summary.valid = true;
}

/*
 * Copies the summary of the job's partition(s) into buf (cap entries) or,
 * when it is larger, into a new array (*heap, to be xfreed), and the
 * resolved partition name into name. Returns the nodes and sets *count.
 */
static lachesis_node_t *_job_nodes(const char *key, lachesis_node_t *buf,
				   int cap, lachesis_node_t **heap,
				   char *name, size_t name_size, int *count)
{
	lachesis_node_t *out = buf;

	*heap = NULL;
	if (key && strlen(key) > SUMMARY_NAME_MAX)
		key = "";	/* not a partition slurmctld accepts */
	slurm_mutex_lock(&summary_lock);
	if (!summary.valid || summary.node_update != last_node_update ||
	    summary.part_update != last_part_update ||
	    strcmp(summary.key, key ? key : ""))
		_fill_summary(key);
	if (summary.n > cap)
		out = *heap = xcalloc(summary.n, sizeof(*out));
	if (summary.n)
		memcpy(out, summary.nodes, summary.n * sizeof(*out));
	*count = summary.n;
	strlcpy(name, summary.name, name_size);
	slurm_mutex_unlock(&summary_lock);
	return out;
}

/* Whether any of the job's TRES requests names a GPU: the core leaves a
 * job without one alone, so there is no need to call it. */
static bool _wants_gpus(const job_desc_msg_t *job_desc)
{
	return (job_desc->tres_per_job && strstr(job_desc->tres_per_job, "gpu")) ||
	       (job_desc->tres_per_node && strstr(job_desc->tres_per_node, "gpu")) ||
	       (job_desc->tres_per_socket && strstr(job_desc->tres_per_socket, "gpu")) ||
	       (job_desc->tres_per_task && strstr(job_desc->tres_per_task, "gpu"));
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
	lachesis_node_t buf[64], *nodes, *heap;
	char part_name[SUMMARY_NAME_MAX + 1];
	int n, rc;

	if (!core_up || !_wants_gpus(job_desc))
		return SLURM_SUCCESS;
	memset(&req, 0, sizeof(req));
	req.user_id = job_desc->user_id;
	req.name = job_desc->name;
	req.comment = job_desc->comment;
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

	nodes = _job_nodes(job_desc->partition, buf, ARRAY_SIZE(buf), &heap,
			   part_name, sizeof(part_name), &n);
	req.partition = part_name;
	rc = lachesis_size_job(&req, nodes, n, &out);
	xfree(heap);
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
	/* After sizing: placement checks the preferred nodes hold the job. */
	lachesis_placement_apply(job_desc, plugin_type);
	return SLURM_SUCCESS;
}

extern int job_modify(job_desc_msg_t *job_desc, job_record_t *job_ptr,
		      uint32_t submit_uid)
{
	/* Sizing happens once, at submit; updates (including Lachesis's own
	 * fallback shrink) go through unchanged. */
	return SLURM_SUCCESS;
}
