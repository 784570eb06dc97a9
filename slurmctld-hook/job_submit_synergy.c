/*
 * job_submit_synergy.c - job_submit/synergy: CPUs and memory per GPU from
 * each model's profile (Synergy, OSDI'22), decided by the Go core.
 *
 * Called with slurmctld's config/job/node/partition READ locks held: it only
 * reads the partition's nodes (a cached summary), makes one call, and edits
 * the job request. Jobs that ask for no GPU never reach the core.
 * The decision's reason goes into the job's admin comment, so
 * `scontrol show job` says why a job got its CPUs and memory.
 *
 * The core sizes the job on its own goroutine, not on the RPC thread (see
 * "The sizing goroutine" below).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "lachesis_hook.h" /* slurm_compat.h: the release's headers */

#include "src/common/bitstring.h"
#include "src/common/log.h"
#include "src/common/macros.h"
#include "src/common/strlcpy.h"
#include "job_submit_placement.h"
#include "size_handoff.h"

const char plugin_name[] = "Lachesis Synergy job_submit plugin";
const char plugin_type[] = "job_submit/synergy";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

static bool core_up = false;

static void _drop_summary(void);
static void _start_sizer(void);
static bool _stop_sizer(void);

extern int init(void)
{
	int rc = lachesis_hook_start(plugin_type, &core_up);

	if (rc == SLURM_SUCCESS && core_up)
		_start_sizer();
	return rc;
}

extern int fini(void)
{
	/* A sizing goroutine still in the core may read the summary's strings:
	 * then they stay (a leak, only when the core hangs). */
	bool stopped = _stop_sizer();

	lachesis_hook_stop(&core_up);
	if (stopped)
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
 * The summary owns copies of the nodes' gres strings: the sizing goroutine
 * may still read a request after the RPC thread that made it gave up and
 * released slurmctld's locks (see the sizing goroutine). Several RPC threads
 * may be here at once (read locks), so the cache has its own mutex, held
 * only to look up or refill it.
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

/* Frees the gres copies of the summary's nodes; summary_lock held. */
static void _free_summary_gres(void)
{
	for (int i = 0; i < summary.n; i++)
		xfree(summary.nodes[i].gres);
	summary.n = 0;
}

static void _drop_summary(void)
{
	slurm_mutex_lock(&summary_lock);
	_free_summary_gres();
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
	_free_summary_gres();
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
			summary.nodes[n].gres = xstrdup(node_ptr->gres ?
				node_ptr->gres : (node_ptr->config_ptr ?
				node_ptr->config_ptr->gres : NULL));
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

/*
 * The sizing goroutine.
 *
 * slurmctld serves every RPC on a new thread, and any C thread that calls
 * into Go, even one long-lived thread of ours, costs slurmctld about 80 us
 * of CPU per call in Go's monitor thread (sysmon), which polls every 20 us
 * for a millisecond or more after each return to C (cgo/sizer.go). So no
 * thread of ours enters Go per job: the RPC thread copies the job into the
 * slot, wakes the core's sizing goroutine through an eventfd and polls
 * another for the answer (size_handoff.c).
 *
 * The wait is bounded (SIZE_WAIT_MS): past it the job is left as
 * submitted with an error line, never stalling slurmctld. The request is a
 * copy owned by the slot, and the nodes' gres strings are the summary's own
 * copies, so a request the RPC thread gave up on can still be read safely;
 * the summary is only refilled while the slot is idle (submissions fill it
 * while they hold the slot).
 */
#define SIZE_WAIT_MS 500
#define SUBMIT_STRING_MAX 8192	/* what the core reads of a string */

static size_handoff_t sizer = SIZE_HANDOFF_INIT;
static int sizer_cap;		/* entries of sizer.slot.nodes */
/* The goroutine did not stop at fini: its slot must never be reused. */
static bool sizer_lost;

/* A copy of at most SUBMIT_STRING_MAX bytes of s (NULL stays NULL). */
static char *_dup_bounded(const char *s)
{
	return s ? xstrndup(s, strnlen(s, SUBMIT_STRING_MAX)) : NULL;
}

/* Frees the slot's string copies (the handoff calls it). */
static void _clear_slot(lachesis_size_slot_t *slot)
{
	xfree(slot->req.name);
	xfree(slot->req.comment);
	xfree(slot->req.tres_per_job);
	xfree(slot->req.tres_per_node);
	xfree(slot->req.tres_per_socket);
	xfree(slot->req.tres_per_task);
	xfree(slot->req.cpus_per_tres);
	xfree(slot->req.mem_per_tres);
	memset(&slot->req, 0, sizeof(slot->req));
	slot->n = 0;
}

static char slot_part_name[SUMMARY_NAME_MAX + 1];

/* Copies req and the nodes of partition key into the acquired slot. */
static void _fill_slot(lachesis_size_slot_t *slot,
		       const lachesis_submit_t *req, const char *key)
{
	lachesis_node_t *heap;
	int n;

	slot->req = *req;
	slot->req.name = _dup_bounded(req->name);
	slot->req.comment = _dup_bounded(req->comment);
	slot->req.tres_per_job = _dup_bounded(req->tres_per_job);
	slot->req.tres_per_node = _dup_bounded(req->tres_per_node);
	slot->req.tres_per_socket = _dup_bounded(req->tres_per_socket);
	slot->req.tres_per_task = _dup_bounded(req->tres_per_task);
	slot->req.cpus_per_tres = _dup_bounded(req->cpus_per_tres);
	slot->req.mem_per_tres = _dup_bounded(req->mem_per_tres);
	(void) _job_nodes(key, slot->nodes, sizer_cap, &heap, slot_part_name,
			  sizeof(slot_part_name), &n);
	if (heap) {	/* the slot's array was too small: adopt the new one */
		xfree(slot->nodes);
		slot->nodes = heap;
		sizer_cap = n;
	}
	slot->n = n;
	slot->req.partition = slot_part_name;
}

static void _start_sizer(void)
{
	int rc;

	if (sizer_lost)
		return;
	if (!size_handoff_open(&sizer, _clear_slot)) {
		error("%s: cannot make the sizing eventfds (%m); sizing on RPC threads",
		      plugin_type);
		return;
	}
	rc = lachesis_sizer_start(&sizer.slot, sizer.ask_fd, sizer.done_fd);
	if (rc != LACHESIS_OK) {
		error("%s: cannot start the sizing goroutine (code %d); sizing on RPC threads",
		      plugin_type, rc);
		size_handoff_close(&sizer);
		return;
	}
	slurm_mutex_lock(&sizer.lock);
	sizer.running = true;
	slurm_mutex_unlock(&sizer.lock);
}

/* Stops the sizing goroutine, waiting a bounded time; false if it is still
 * in the core (it is then left to finish on its own, with its slot). */
static bool _stop_sizer(void)
{
	bool was_running;

	slurm_mutex_lock(&sizer.lock);
	was_running = sizer.running;
	sizer.running = false;
	slurm_mutex_unlock(&sizer.lock);
	if (!was_running)
		return true;
	if (!lachesis_sizer_stop(2000)) {
		error("%s: the sizing goroutine did not stop within 2 s; left running",
		      plugin_type);
		sizer_lost = true;
		return false;
	}
	size_handoff_close(&sizer);
	xfree(sizer.slot.nodes);
	sizer_cap = 0;
	return true;
}

/* Sizes req (nodes from partition key) on the sizing goroutine. Returns
 * the core's code, or HANDOFF_TIMEOUT / HANDOFF_OFF (as SIZER_*). */
#define SIZER_TIMEOUT 1000	/* not a LACHESIS_* code */
#define SIZER_OFF 1001

static int _size_on_sizer(const lachesis_submit_t *req, const char *key,
			  lachesis_sizing_t *out)
{
	lachesis_size_slot_t *slot;
	int why, rc;

	if (!(slot = size_handoff_acquire(&sizer, &why)))
		return why == HANDOFF_OFF ? SIZER_OFF : SIZER_TIMEOUT;
	_fill_slot(slot, req, key);
	if (size_handoff_ask(&sizer, SIZE_WAIT_MS, out, &rc) != HANDOFF_DONE)
		return SIZER_TIMEOUT;
	return rc;
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

/*
 * A job the core rewrites from one GPU into out->shards gres/shard of one
 * GPU (core/shardconvert.go): the core does so only for a job whose GPU
 * request is one untyped GPU in tres_per_job or tres_per_node and nothing
 * else, so both go. Slurm 22.05 allocates a GPU as gpu or as shards,
 * never both: the job keeps no gres/gpu, and its CPUs and memory, per GPU
 * until now, become per task and per node (one of each).
 */
static void _to_shards(job_desc_msg_t *job_desc, const lachesis_sizing_t *out)
{
	xfree(job_desc->tres_per_job);
	xfree(job_desc->tres_per_node);
	xstrfmtcat(job_desc->tres_per_node, LACHESIS_GRES_PREFIX "shard:%u",
		   out->shards);
	xfree(job_desc->cpus_per_tres);
	xfree(job_desc->mem_per_tres);
	if (out->cpus_per_gpu && out->cpus_per_gpu < NO_VAL16)
		job_desc->cpus_per_task = out->cpus_per_gpu;
	if (out->mem_mb_per_gpu && out->mem_mb_per_gpu < MEM_PER_CPU)
		job_desc->pn_min_memory = out->mem_mb_per_gpu;
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
	req.exclusive = job_desc->shared == JOB_SHARED_NONE;

	rc = _size_on_sizer(&req, job_desc->partition, &out);
	if (rc == SIZER_OFF) {	/* no sizing goroutine: call the core from here */
		nodes = _job_nodes(job_desc->partition, buf, ARRAY_SIZE(buf),
				   &heap, part_name, sizeof(part_name), &n);
		req.partition = part_name;
		rc = lachesis_size_job(&req, nodes, n, &out);
		xfree(heap);
	} else if (rc == SIZER_TIMEOUT) {
		error("%s: no sizing answer within %d ms; job of uid %u left as submitted",
		      plugin_type, SIZE_WAIT_MS, submit_uid);
		return SLURM_SUCCESS;
	}
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
			xstrfmtcat(job_desc->cpus_per_tres,
				   LACHESIS_GRES_PREFIX "gpu:%u",
				   out.cpus_per_gpu);
			if (out.clear_cpus_per_task)
				job_desc->cpus_per_task = NO_VAL16;
		}
		if (out.mem_mb_per_gpu) {
			xfree(job_desc->mem_per_tres);
			xstrfmtcat(job_desc->mem_per_tres,
				   LACHESIS_GRES_PREFIX "gpu:%" PRIu64,
				   out.mem_mb_per_gpu);
			if (out.clear_mem)
				job_desc->pn_min_memory = NO_VAL64;
		}
		break;
	case LACHESIS_SIZE_SHARDS:
		_to_shards(job_desc, &out);
		info("%s: job of uid %u: %s", plugin_type, submit_uid,
		     out.reason);
		break;
	default:
		break;
	}
	/* Only a sizing of both CPUs and memory ends with the marker the
	 * fallback reads back (never a job on shards: its CPUs are per task,
	 * not per GPU). */
	lachesis_hook_append_reason(&job_desc->admin_comment, out.reason,
				    out.action == LACHESIS_SIZE_SET &&
				    out.cpus_per_gpu && out.mem_mb_per_gpu);
	debug("%s: %s", plugin_type, out.reason);
	/* After sizing: placement checks the preferred nodes hold the job.
	 * Only when it is on: it walks the partition and calls the core from
	 * this RPC thread, which the sizing goroutine exists to avoid. */
	if (out.placement && out.action != LACHESIS_SIZE_SHARDS)
		lachesis_placement_apply(job_desc, plugin_type);
	return SLURM_SUCCESS;
}

/* job_modify, whose signature is the release's (slurm_compat.h); err_msg
 * is NULL where the release has none. */
static int _modify(job_desc_msg_t *job_desc, job_record_t *job_ptr,
		   uint32_t submit_uid, char **err_msg)
{
	/* Sizing happens once, at submit; updates (including Lachesis's own
	 * fallback shrink) go through unchanged. */
	return SLURM_SUCCESS;
}

LACHESIS_JOB_MODIFY(_modify)
