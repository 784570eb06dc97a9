/*
 * job_submit_synergy.c - job_submit/synergy: CPUs and memory per GPU from
 * each model's profile (Synergy, OSDI'22), decided by the Go core.
 *
 * Called with slurmctld's config/job/node/partition READ locks held: it only
 * reads the partition's nodes (a cached summary), makes one call, and edits
 * the job request. Jobs that ask for no GPU never reach the core, but for
 * a job asking for a share of one (gres/shard, gres/mps), which the core
 * only checks: while whole GPUs are rewritten into shards it refuses a
 * guaranteed job's own share (gpushare/shardconvert.go).
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

static void _drop_summaries(void);
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
	/* A sizing goroutine still in the core may read a summary: then the
	 * summaries stay (a leak, only when the core hangs). */
	bool stopped = _stop_sizer();

	lachesis_hook_stop(&core_up);
	if (stopped)
		_drop_summaries();
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
 * A summary is made once and never changed: it owns copies of its nodes'
 * gres strings and of the resolved partition name, and is freed when its
 * last reference goes. The cache holds one reference per entry and every
 * request in flight one more, so a request the sizing goroutine still
 * reads after its RPC thread gave up (and released slurmctld's locks)
 * keeps its summary, whatever other threads do to the cache meanwhile.
 * Entries are keyed by the partition string and by
 * last_node_update/last_part_update, which slurmctld bumps on every change
 * of a node or partition record (including a node's gres); we are called
 * with the node and partition read locks held, so neither moves under us.
 * From Slurm 23.02 several RPC threads may be here at once (read locks),
 * so the cache has its own mutex, held only to look up, add or release.
 */
#define SUMMARY_NAME_MAX 1024	/* slurmctld refuses longer partitions */
#define SUMMARY_CACHE 4		/* partition strings remembered at once */

typedef struct summary {
	int refs;		/* summary_lock */
	char key[SUMMARY_NAME_MAX + 1];	/* the partition string as given */
	time_t node_update, part_update;
	char name[SUMMARY_NAME_MAX + 1];	/* resolved, for the core */
	lachesis_node_t *nodes;
	int n;
} summary_t;

static pthread_mutex_t summary_lock = PTHREAD_MUTEX_INITIALIZER;
static summary_t *summaries[SUMMARY_CACHE];	/* most recent first */

/* Drops one reference to sum, freeing it with the last. */
static void _summary_release(summary_t *sum)
{
	bool last;

	if (!sum)
		return;
	slurm_mutex_lock(&summary_lock);
	last = (--sum->refs == 0);
	slurm_mutex_unlock(&summary_lock);
	if (!last)
		return;
	for (int i = 0; i < sum->n; i++)
		xfree(sum->nodes[i].gres);
	xfree(sum->nodes);
	xfree(sum);
}

static void _drop_summaries(void)
{
	summary_t *drop[SUMMARY_CACHE];

	slurm_mutex_lock(&summary_lock);
	memcpy(drop, summaries, sizeof(drop));
	memset(summaries, 0, sizeof(summaries));
	slurm_mutex_unlock(&summary_lock);
	for (int i = 0; i < SUMMARY_CACHE; i++)
		_summary_release(drop[i]);
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

/* A new summary (one reference) of partition string key ("": the
 * default). Node and partition read locks held. */
static summary_t *_summary_make(const char *key)
{
	summary_t *sum = xmalloc(sizeof(*sum));
	bitstr_t *nodes_bitmap = NULL;
	int first, last;

	sum->refs = 1;
	strlcpy(sum->key, key, sizeof(sum->key));
	sum->node_update = last_node_update;
	sum->part_update = last_part_update;
	if (!key[0]) {
		_add_part(&nodes_bitmap, default_part_loc);
		if (default_part_loc && default_part_loc->name)
			strlcpy(sum->name, default_part_loc->name,
				sizeof(sum->name));
	} else {
		char *names = xstrdup(key), *save = NULL, *tok;

		for (tok = strtok_r(names, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save))
			_add_part(&nodes_bitmap, find_part_record(tok));
		xfree(names);
		strlcpy(sum->name, key, sizeof(sum->name));
	}
	if (nodes_bitmap && (first = bit_ffs(nodes_bitmap)) >= 0) {
		last = bit_fls(nodes_bitmap);
		sum->nodes = xcalloc(bit_set_count(nodes_bitmap),
				     sizeof(*sum->nodes));
		for (int i = first; i <= last; i++) {
			node_record_t *node_ptr;

			if (!bit_test(nodes_bitmap, i) ||
			    !(node_ptr = node_record_table_ptr[i]))
				continue;
			sum->nodes[sum->n].cpus = node_ptr->cpus;
			sum->nodes[sum->n].mem_mb = node_ptr->real_memory;
			sum->nodes[sum->n].gres = xstrdup(node_ptr->gres ?
				node_ptr->gres : (node_ptr->config_ptr ?
				node_ptr->config_ptr->gres : NULL));
			sum->n++;
		}
	}
	FREE_NULL_BITMAP(nodes_bitmap);
	return sum;
}

/*
 * The summary of the job's partition(s), with a reference the caller
 * releases (_summary_release) once nothing reads it any more. Node and
 * partition read locks held. A new summary is made outside summary_lock,
 * so threads asking for other partitions do not wait for it; two threads
 * that make the same one at once both use their own, and the cache keeps
 * the later.
 */
static summary_t *_job_nodes(const char *key)
{
	summary_t *sum = NULL, *made, *evicted = NULL;
	int at;

	if (!key || (strlen(key) > SUMMARY_NAME_MAX))
		key = "";	/* none, or not a partition slurmctld accepts */
	slurm_mutex_lock(&summary_lock);
	for (at = 0; at < SUMMARY_CACHE; at++) {
		summary_t *s = summaries[at];

		if (s && !strcmp(s->key, key) &&
		    (s->node_update == last_node_update) &&
		    (s->part_update == last_part_update)) {
			sum = s;
			sum->refs++;
			/* most recent first */
			memmove(&summaries[1], &summaries[0],
				at * sizeof(summaries[0]));
			summaries[0] = sum;
			break;
		}
	}
	slurm_mutex_unlock(&summary_lock);
	if (sum)
		return sum;

	made = _summary_make(key);
	slurm_mutex_lock(&summary_lock);
	made->refs++;	/* the cache's */
	/* An entry for the same key (stale, or made by another thread just
	 * now) goes, else the least recent. */
	for (at = 0; at < SUMMARY_CACHE - 1; at++)
		if (summaries[at] && !strcmp(summaries[at]->key, key))
			break;
	evicted = summaries[at];
	memmove(&summaries[1], &summaries[0], at * sizeof(summaries[0]));
	summaries[0] = made;
	slurm_mutex_unlock(&summary_lock);
	_summary_release(evicted);
	return made;
}

/*
 * The sizing goroutine.
 *
 * slurmctld serves every RPC on a new thread, and any C thread that calls
 * into Go, even one long-lived thread of ours, costs slurmctld about 80 us
 * of CPU per call in Go's monitor thread (sysmon), which polls every 20 us
 * for a millisecond or more after each return to C (cgo/sizer.go). So no
 * thread of ours enters Go per job: the RPC thread copies the job into a
 * slot of its own, wakes the core's sizing goroutine through an eventfd
 * and polls the slot's own eventfd for the answer (size_handoff.c; several
 * slots, since Slurm 23.02 runs job_submit on several threads at once).
 *
 * The wait is bounded (SIZE_WAIT_MS, for a slot and the answer together):
 * past it the job is left as submitted with an error line, never stalling
 * slurmctld. The request is a copy owned by the slot, and its nodes are a
 * summary the slot holds a reference to, so a request the RPC thread gave
 * up on can still be read safely until the goroutine is done with it.
 */
#define SIZE_WAIT_MS 500
#define SUBMIT_STRING_MAX 8192	/* what the core reads of a string */

static size_handoff_t sizer = SIZE_HANDOFF_INIT;
/* Each slot's summary reference (slot i's nodes and partition name). */
static summary_t *slot_summary[SIZE_HANDOFF_SLOTS];
/* The goroutine did not stop at fini: its slots must never be reused. */
static bool sizer_lost;

/* A copy of at most SUBMIT_STRING_MAX bytes of s (NULL stays NULL). */
static char *_dup_bounded(const char *s)
{
	return s ? xstrndup(s, strnlen(s, SUBMIT_STRING_MAX)) : NULL;
}

/* Frees slot i's string copies and its summary reference (the handoff
 * calls it; whoever holds the slot, or nobody any more). */
static void _clear_slot(size_handoff_t *h, int i)
{
	lachesis_size_slot_t *slot = &h->slots[i];

	xfree(slot->req.name);
	xfree(slot->req.comment);
	xfree(slot->req.tres_per_job);
	xfree(slot->req.tres_per_node);
	xfree(slot->req.tres_per_socket);
	xfree(slot->req.tres_per_task);
	xfree(slot->req.cpus_per_tres);
	xfree(slot->req.mem_per_tres);
	memset(&slot->req, 0, sizeof(slot->req));
	slot->nodes = NULL;
	slot->n = 0;
	_summary_release(slot_summary[i]);
	slot_summary[i] = NULL;
}

/* Copies req and the nodes of partition key into slot i, which the
 * caller holds. */
static void _fill_slot(int i, const lachesis_submit_t *req, const char *key)
{
	lachesis_size_slot_t *slot = &sizer.slots[i];
	summary_t *sum = _job_nodes(key);

	slot->req = *req;
	slot->req.name = _dup_bounded(req->name);
	slot->req.comment = _dup_bounded(req->comment);
	slot->req.tres_per_job = _dup_bounded(req->tres_per_job);
	slot->req.tres_per_node = _dup_bounded(req->tres_per_node);
	slot->req.tres_per_socket = _dup_bounded(req->tres_per_socket);
	slot->req.tres_per_task = _dup_bounded(req->tres_per_task);
	slot->req.cpus_per_tres = _dup_bounded(req->cpus_per_tres);
	slot->req.mem_per_tres = _dup_bounded(req->mem_per_tres);
	slot->req.partition = sum->name;
	slot->nodes = sum->nodes;
	slot->n = sum->n;
	slot_summary[i] = sum;
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
	rc = lachesis_sizer_start(sizer.slots, SIZE_HANDOFF_SLOTS,
				  sizer.ask_fd);
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
 * in the core (it is then left to finish on its own, with its slots). */
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
	return true;
}

/* Sizes req (nodes from partition key) on the sizing goroutine. Returns
 * the core's code, or SIZER_TIMEOUT / SIZER_OFF. */
#define SIZER_TIMEOUT 1000	/* not a LACHESIS_* code */
#define SIZER_OFF 1001

static int _size_on_sizer(const lachesis_submit_t *req, const char *key,
			  lachesis_sizing_t *out)
{
	int64_t deadline = size_handoff_deadline(SIZE_WAIT_MS);
	int i, why, rc;

	if ((i = size_handoff_acquire(&sizer, deadline, &why)) < 0)
		return why == HANDOFF_OFF ? SIZER_OFF : SIZER_TIMEOUT;
	_fill_slot(i, req, key);
	if (size_handoff_ask(&sizer, i, deadline, out, &rc) != HANDOFF_DONE)
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

/* Whether the job may ask for a share of a GPU (gres/shard or gres/mps):
 * the core checks it (policy/gres reads the strings; a guaranteed job's
 * own share is refused while whole GPUs are rewritten into shards,
 * gpushare/shardconvert.go). A loose test: the core decides. */
static bool _wants_gpu_share(const job_desc_msg_t *job_desc)
{
	const char *s[] = { job_desc->tres_per_job, job_desc->tres_per_node,
			    job_desc->tres_per_socket, job_desc->tres_per_task };

	for (int i = 0; i < 4; i++)
		if (s[i] && (strstr(s[i], "shard") || strstr(s[i], "mps")))
			return true;
	return false;
}

/*
 * The job's CPU count as the client worked it out from the request the
 * plugin just changed (24.11's sbatch sends --gpus=1 --cpus-per-gpu=2 as
 * min_cpus 2) goes, so that slurmctld derives it from the new one: from
 * the tasks and CPUs per task (validate_job_create_req), raised to the
 * CPUs per GPU times the GPUs (gres_job_state_validate). Kept, a minimum
 * above what the new CPUs per GPU give the job's GPUs made 24.11's
 * cons_tres refuse the job as never runnable ("Requested node
 * configuration is not available").
 */
static void _derive_min_cpus(job_desc_msg_t *job_desc)
{
	job_desc->min_cpus = NO_VAL;
}

/*
 * A job the core rewrites from one GPU into out->shards gres/shard of one
 * GPU (gpushare/shardconvert.go): the core does so only for a job whose GPU
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
	_derive_min_cpus(job_desc);
	if (out->mem_mb_per_gpu && out->mem_mb_per_gpu < MEM_PER_CPU)
		job_desc->pn_min_memory = out->mem_mb_per_gpu;
}

extern int job_submit(job_desc_msg_t *job_desc, uint32_t submit_uid,
		      char **err_msg)
{
	lachesis_submit_t req;
	lachesis_sizing_t out;
	int rc;
	/* A job with a share of a GPU and no GPU is only checked, never
	 * sized: the core's answer is a refusal or nothing. */
	bool share_only = false;

	if (!core_up)
		return SLURM_SUCCESS;
	if (!_wants_gpus(job_desc)) {
		if (!_wants_gpu_share(job_desc))
			return SLURM_SUCCESS;
		share_only = true;
	}
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
		summary_t *sum = _job_nodes(job_desc->partition);

		req.partition = sum->name;
		rc = lachesis_size_job(&req, sum->nodes, sum->n, &out);
		_summary_release(sum);
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

	if (share_only && out.action != LACHESIS_SIZE_REJECT)
		return SLURM_SUCCESS;
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
			_derive_min_cpus(job_desc);
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
