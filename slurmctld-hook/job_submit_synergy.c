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
 * The call into the core runs on one long-lived thread of ours, not on the
 * RPC thread (see "The sizing thread" below).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

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
	/* A sizing thread still in the core may read the summary's strings:
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
 * The summary owns copies of the nodes' gres strings: the sizing thread
 * may still read a request after the RPC thread that made it gave up and
 * released slurmctld's locks (see the sizing thread). Several RPC threads
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
 * The sizing thread.
 *
 * slurmctld serves every RPC on a new thread, so calling the Go core from
 * job_submit() makes each submission the first Go call of a fresh thread.
 * Binding a thread to Go costs little by itself (~10 us), but the thread
 * leaves Go holding a Go processor in the "in a C call" state, and Go's
 * monitor thread (sysmon) keeps polling every 20 us or so until it takes
 * that processor back: about 200 us of CPU per submission in all, measured
 * with perf in slurmctld and in a stand-alone test. So one thread of ours,
 * bound to Go once, makes every call, and the RPC thread hands it the job
 * and waits for the answer.
 *
 * The wait is bounded (SIZE_WAIT_MS over waiting for the thread to be free
 * and for the answer): past it the job is left as submitted with an error
 * line, never stalling slurmctld. The request is a copy owned by the slot,
 * and the nodes' gres strings are the summary's own copies, so a request
 * the RPC thread gave up on can still be read safely; the summary is only
 * refilled while the slot is idle (submissions fill it under sizer.lock).
 */
#define SIZE_WAIT_MS 500
#define SUBMIT_STRING_MAX 8192	/* what the core reads of a string */
#define SIZER_TIMEOUT 1000	/* not a LACHESIS_* code */
#define SIZER_OFF 1001

enum slot_state { SLOT_IDLE, SLOT_ASKED, SLOT_BUSY, SLOT_DONE, SLOT_ABANDONED };

static struct {
	pthread_mutex_t lock;
	pthread_cond_t work;	/* to the sizing thread: a job, or stop */
	pthread_cond_t done;	/* to RPC threads: an answer, or idle again */
	bool conds_ready, running, stop;
	pthread_t thread;
	enum slot_state state;
	/* The slot: strings, nodes and partition name owned here. */
	lachesis_submit_t req;
	lachesis_node_t *nodes;
	int n, cap;
	char part_name[SUMMARY_NAME_MAX + 1];
	lachesis_sizing_t out;
	int rc;
} sizer = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* A copy of at most SUBMIT_STRING_MAX bytes of s (NULL stays NULL). */
static char *_dup_bounded(const char *s)
{
	return s ? xstrndup(s, strnlen(s, SUBMIT_STRING_MAX)) : NULL;
}

/* Frees the slot's string copies; sizer.lock held, or the thread's. */
static void _clear_slot(void)
{
	xfree(sizer.req.name);
	xfree(sizer.req.comment);
	xfree(sizer.req.tres_per_job);
	xfree(sizer.req.tres_per_node);
	xfree(sizer.req.tres_per_socket);
	xfree(sizer.req.tres_per_task);
	xfree(sizer.req.cpus_per_tres);
	xfree(sizer.req.mem_per_tres);
	memset(&sizer.req, 0, sizeof(sizer.req));
	sizer.n = 0;
}

/* Copies req and the nodes of partition key into the idle slot. */
static void _fill_slot(const lachesis_submit_t *req, const char *key)
{
	lachesis_node_t *heap;

	sizer.req = *req;
	sizer.req.name = _dup_bounded(req->name);
	sizer.req.comment = _dup_bounded(req->comment);
	sizer.req.tres_per_job = _dup_bounded(req->tres_per_job);
	sizer.req.tres_per_node = _dup_bounded(req->tres_per_node);
	sizer.req.tres_per_socket = _dup_bounded(req->tres_per_socket);
	sizer.req.tres_per_task = _dup_bounded(req->tres_per_task);
	sizer.req.cpus_per_tres = _dup_bounded(req->cpus_per_tres);
	sizer.req.mem_per_tres = _dup_bounded(req->mem_per_tres);
	(void) _job_nodes(key, sizer.nodes, sizer.cap, &heap, sizer.part_name,
			  sizeof(sizer.part_name), &sizer.n);
	if (heap) {	/* the slot's array was too small: adopt the new one */
		xfree(sizer.nodes);
		sizer.nodes = heap;
		sizer.cap = sizer.n;
	}
	sizer.req.partition = sizer.part_name;
}

static void *_sizer_main(void *arg)
{
	lachesis_sizing_t out;
	int rc;

	slurm_mutex_lock(&sizer.lock);
	while (!sizer.stop) {
		if (sizer.state != SLOT_ASKED) {
			pthread_cond_wait(&sizer.work, &sizer.lock);
			continue;
		}
		sizer.state = SLOT_BUSY;
		slurm_mutex_unlock(&sizer.lock);
		rc = lachesis_size_job(&sizer.req, sizer.nodes, sizer.n, &out);
		slurm_mutex_lock(&sizer.lock);
		if (sizer.state == SLOT_BUSY) {
			sizer.out = out;
			sizer.rc = rc;
			sizer.state = SLOT_DONE;
		} else {	/* abandoned: the RPC thread has gone */
			_clear_slot();
			sizer.state = SLOT_IDLE;
		}
		pthread_cond_broadcast(&sizer.done);
	}
	sizer.running = false;
	pthread_cond_broadcast(&sizer.done);
	slurm_mutex_unlock(&sizer.lock);
	return NULL;
}

static void _deadline(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long) (ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static void _start_sizer(void)
{
	sigset_t block, old;
	int rc;

	slurm_mutex_lock(&sizer.lock);
	if (!sizer.conds_ready) {
		pthread_condattr_t attr;

		pthread_condattr_init(&attr);
		pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
		pthread_cond_init(&sizer.work, &attr);
		pthread_cond_init(&sizer.done, &attr);
		pthread_condattr_destroy(&attr);
		sizer.conds_ready = true;
	}
	if (sizer.running) {
		slurm_mutex_unlock(&sizer.lock);
		return;
	}
	sizer.stop = false;
	sizer.state = SLOT_IDLE;
	/* slurmctld takes these in its signal thread (sigwait); they must
	 * stay blocked here too, whatever the creating thread had. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGQUIT);
	sigaddset(&block, SIGABRT);
	sigaddset(&block, SIGUSR1);
	sigaddset(&block, SIGUSR2);
	sigaddset(&block, SIGPIPE);
	sigaddset(&block, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	rc = pthread_create(&sizer.thread, NULL, _sizer_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		error("%s: cannot start the sizing thread (%s); sizing on RPC threads",
		      plugin_type, strerror(rc));
	else
		sizer.running = true;
	slurm_mutex_unlock(&sizer.lock);
}

/* Stops the sizing thread, waiting a bounded time; false if it is still
 * in the core (it is then left to finish on its own). */
static bool _stop_sizer(void)
{
	struct timespec deadline;
	bool stopped;

	slurm_mutex_lock(&sizer.lock);
	if (!sizer.running) {
		slurm_mutex_unlock(&sizer.lock);
		return true;
	}
	sizer.stop = true;
	pthread_cond_signal(&sizer.work);
	_deadline(&deadline, 2000);
	while (sizer.running &&
	       pthread_cond_timedwait(&sizer.done, &sizer.lock, &deadline) != ETIMEDOUT)
		;
	stopped = !sizer.running;
	slurm_mutex_unlock(&sizer.lock);
	if (stopped) {
		pthread_join(sizer.thread, NULL);
		slurm_mutex_lock(&sizer.lock);
		_clear_slot();
		xfree(sizer.nodes);
		sizer.cap = 0;
		slurm_mutex_unlock(&sizer.lock);
	} else {
		error("%s: the sizing thread did not stop within 2 s; left running",
		      plugin_type);
		pthread_detach(sizer.thread);
	}
	return stopped;
}

/* Sizes req (nodes from partition key) on the sizing thread. Returns the
 * core's code, SIZER_TIMEOUT when no answer came within SIZE_WAIT_MS, or
 * SIZER_OFF when the thread is not running (the caller then calls the core
 * itself). */
static int _size_on_sizer(const lachesis_submit_t *req, const char *key,
			  lachesis_sizing_t *out)
{
	struct timespec deadline;
	int rc = SIZER_TIMEOUT;

	slurm_mutex_lock(&sizer.lock);
	if (!sizer.running) {
		slurm_mutex_unlock(&sizer.lock);
		return SIZER_OFF;
	}
	if (sizer.state != SLOT_IDLE) {
		/* Submissions are serialised (job_submit's context lock), so
		 * this is a job an earlier RPC gave up on, still in the core:
		 * do not wait for it again. */
		slurm_mutex_unlock(&sizer.lock);
		return rc;
	}
	_deadline(&deadline, SIZE_WAIT_MS);
	_fill_slot(req, key);
	sizer.state = SLOT_ASKED;
	pthread_cond_signal(&sizer.work);
	while ((sizer.state == SLOT_ASKED || sizer.state == SLOT_BUSY) &&
	       pthread_cond_timedwait(&sizer.done, &sizer.lock, &deadline) != ETIMEDOUT)
		;
	switch (sizer.state) {
	case SLOT_DONE:
		*out = sizer.out;
		rc = sizer.rc;
		_clear_slot();
		sizer.state = SLOT_IDLE;
		break;
	case SLOT_ASKED:	/* never picked up: take it back */
		_clear_slot();
		sizer.state = SLOT_IDLE;
		break;
	case SLOT_BUSY:		/* the thread clears it when it is done */
		sizer.state = SLOT_ABANDONED;
		break;
	default:
		break;
	}
	slurm_mutex_unlock(&sizer.lock);
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

	rc = _size_on_sizer(&req, job_desc->partition, &out);
	if (rc == SIZER_OFF) {	/* no sizing thread: call the core from here */
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
	/* After sizing: placement checks the preferred nodes hold the job.
	 * Only when it is on: it walks the partition and calls the core from
	 * this RPC thread, which the sizing thread exists to avoid. */
	if (out.placement)
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
