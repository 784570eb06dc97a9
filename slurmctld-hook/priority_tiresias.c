/*
 * priority_tiresias.c - priority/tiresias: Tiresias (two-dimensional
 * attained service) job priorities for slurmctld.
 *
 * Thin by design: it copies job fields into flat structs, makes one call
 * into the Go core per pass, and writes the priorities back. Slurm calls
 * priority_p_set only at submit, release, requeue and updates, so the plugin
 * runs its own pass thread, like priority/multifactor's decay thread, to
 * re-rank running and pending jobs as their attained service grows.
 */
#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include <inttypes.h>

#include "lachesis_hook.h" /* slurm_compat.h: the release's headers */
#include "reason_text.h"

#include "src/common/assoc_mgr.h"
#include "src/common/slurm_protocol_api.h"
#include "src/common/log.h"
#include "src/common/macros.h"
#include "src/common/run_in_daemon.h"
#include "src/common/strlcpy.h"
#include "src/common/timers.h"

/* Defined here so the plugin also loads into programs other than slurmctld
 * (sshare dlopens priority plugins); slurmctld's own definitions take
 * precedence when it loads us. */
list_t *job_list = NULL;
time_t last_job_update = (time_t) 0;
int slurmctld_tres_cnt = 0;

const char plugin_name[] = "Lachesis Tiresias priority plugin";
const char plugin_type[] = "priority/tiresias";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

static bool core_up = false;
static pthread_t pass_thread;
static bool pass_thread_started = false;
static pthread_mutex_t pass_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pass_cond = PTHREAD_COND_INITIALIZER;
static bool pass_stop = false;

/* Pass buffers, reused between passes; only the pass thread touches them. */
static lachesis_job_t *pass_jobs = NULL;
static lachesis_prio_t *pass_prios = NULL;
static job_record_t **pass_ptrs = NULL;
static int pass_cap = 0;
/* The nodes of the pass's running jobs on several nodes, one after the
 * other in the jobs' order (lachesis_job_t.nodes points into it). */
static int32_t *pass_nodes = NULL;
static int pass_nodes_cap = 0;

/* Appends the job's nodes to pass_nodes at *used, growing it; the
 * pointers into it are set once the whole pass is copied. */
static void _add_job_nodes(job_record_t *job_ptr, lachesis_job_t *out,
			   int *used)
{
	int n;

	if ((out->state != LACHESIS_RUNNING) || (out->node_count < 2))
		return;
	if (pass_nodes_cap - *used < (int) out->node_count) {
		pass_nodes_cap = MAX(*used + (int) out->node_count,
				     2 * pass_nodes_cap);
		xrecalloc(pass_nodes, pass_nodes_cap, sizeof(*pass_nodes));
	}
	n = lachesis_hook_job_nodes(job_ptr, pass_nodes + *used,
				    out->node_count);
	if (n != (int) out->node_count) {
		out->node_count = 0; /* cannot say where it runs */
		return;
	}
	*used += n;
}

/* Points each running job on several nodes at its nodes in pass_nodes. */
static void _point_job_nodes(int n)
{
	int at = 0;

	for (int i = 0; i < n; i++) {
		if ((pass_jobs[i].state != LACHESIS_RUNNING) ||
		    (pass_jobs[i].node_count < 2))
			continue;
		pass_jobs[i].nodes = pass_nodes + at;
		at += pass_jobs[i].node_count;
	}
}

static void _grow_buffers(int n)
{
	if (n <= pass_cap)
		return;
	pass_cap = MAX(n, 2 * pass_cap);
	xrecalloc(pass_jobs, pass_cap, sizeof(*pass_jobs));
	xrecalloc(pass_prios, pass_cap, sizeof(*pass_prios));
	xrecalloc(pass_ptrs, pass_cap, sizeof(*pass_ptrs));
}

/* One node's capacity and current use. Needs the node write lock:
 * select_g_select_nodeinfo_set_all() refreshes the allocation counts. */
static void _fill_node_state(node_record_t *node_ptr,
			     lachesis_node_state_t *out)
{
	uint16_t alloc_cpus = 0;
	uint64_t alloc_mem = 0;
	list_itr_t *itr;
	gres_state_t *gres_state;

	memset(out, 0, sizeof(*out));
	out->cpus = node_ptr->cpus;
	out->mem_mb = node_ptr->real_memory;
	select_g_select_nodeinfo_get(node_ptr->select_nodeinfo,
				     SELECT_NODEDATA_SUBCNT,
				     NODE_STATE_ALLOCATED, &alloc_cpus);
	select_g_select_nodeinfo_get(node_ptr->select_nodeinfo,
				     SELECT_NODEDATA_MEM_ALLOC,
				     NODE_STATE_ALLOCATED, &alloc_mem);
	out->alloc_cpus = alloc_cpus;
	out->alloc_mem_mb = alloc_mem;
	if (node_ptr->gres_list) {
		itr = list_iterator_create(node_ptr->gres_list);
		while ((gres_state = list_next(itr))) {
			gres_node_state_t *ns = gres_state->gres_data;
			if (xstrcmp(gres_state->gres_name, "gpu") || !ns)
				continue;
			out->gpus += ns->gres_cnt_avail;
			out->alloc_gpus += ns->gres_cnt_alloc;
		}
		list_iterator_destroy(itr);
	}
	out->usable = !IS_NODE_DOWN(node_ptr) && !IS_NODE_DRAIN(node_ptr) &&
		      !IS_NODE_FAIL(node_ptr) && !IS_NODE_FUTURE(node_ptr) &&
		      !IS_NODE_NO_RESPOND(node_ptr);
}

/* The job's string as the core saw it: NULL is "". */
static const char *_or_empty(const char *s)
{
	return s ? s : "";
}

/* Applies one shrink through Slurm's own job update, which validates it
 * exactly as it would `scontrol update`. Caller holds the update locks.
 * The update runs as SlurmUser; the core judged it against the job's
 * request as the pass copied it (a lowering never raises either
 * dimension, read by policy/gres), so it is applied only to a job whose
 * request is still exactly that: compared here, never read. */
static void _apply_shrink(lachesis_shrink_t *sh)
{
	job_desc_msg_t desc;
	slurm_msg_t msg;
	int rc;

	job_record_t *job_ptr = find_job_record(sh->job_id);

	if (!job_ptr || !IS_JOB_PENDING(job_ptr))
		return;
	if (strcmp(_or_empty(job_ptr->cpus_per_tres), sh->cpus_per_tres) ||
	    strcmp(_or_empty(job_ptr->mem_per_tres), sh->mem_per_tres)) {
		/* The job's owner wrote these strings: no control byte of
		 * theirs goes into slurmctld's log. */
		char cpus[64], mem[64];
		lachesis_reason_clean(cpus, sizeof(cpus),
				      _or_empty(job_ptr->cpus_per_tres), 0);
		lachesis_reason_clean(mem, sizeof(mem),
				      _or_empty(job_ptr->mem_per_tres), 0);
		info("%s: JobId=%u's request changed since the pass (CpusPerTres=%s MemPerTres=%s); not resized, the next pass decides again",
		     plugin_type, sh->job_id, cpus, mem);
		return;
	}
	slurm_init_job_desc_msg(&desc);
	desc.job_id = sh->job_id;
	/* Slurm re-validates a job's whole GPU request when any per-TRES
	 * field changes: restate the request as it is. */
	desc.tres_per_job = xstrdup(job_ptr->tres_per_job);
	desc.tres_per_node = xstrdup(job_ptr->tres_per_node);
	desc.tres_per_socket = xstrdup(job_ptr->tres_per_socket);
	desc.tres_per_task = xstrdup(job_ptr->tres_per_task);
	xstrfmtcat(desc.cpus_per_tres, LACHESIS_GRES_PREFIX "gpu:%u",
		   sh->cpus_per_gpu);
	xstrfmtcat(desc.mem_per_tres, LACHESIS_GRES_PREFIX "gpu:%" PRIu64,
		   sh->mem_mb_per_gpu);
	desc.admin_comment = xstrdup(sh->admin_comment);
	slurm_msg_t_init(&msg);
	msg.msg_type = REQUEST_UPDATE_JOB;
	msg.data = &desc;
	rc = update_job(&msg, slurm_conf.slurm_user_id, false);
	if (rc == SLURM_SUCCESS)
		lachesis_job_gres_updated(job_ptr);
	if (rc != SLURM_SUCCESS)
		error("%s: could not shrink JobId=%u to %u CPUs/%" PRIu64
		      " MB per GPU: %s", plugin_type, sh->job_id,
		      sh->cpus_per_gpu, sh->mem_mb_per_gpu, slurm_strerror(rc));
	else
		info("%s: JobId=%u %s to %u CPUs, %" PRIu64
		     " MB per GPU (start-time sizing)", plugin_type,
		     sh->job_id, sh->raise ? "raised" : "lowered",
		     sh->cpus_per_gpu, sh->mem_mb_per_gpu);
	xfree(desc.tres_per_job);
	xfree(desc.tres_per_node);
	xfree(desc.tres_per_socket);
	xfree(desc.tres_per_task);
	xfree(desc.cpus_per_tres);
	xfree(desc.mem_per_tres);
	xfree(desc.admin_comment);
	xfree(desc.job_id_str);
	FREE_NULL_BITMAP(desc.array_bitmap);
}

/* The Synergy fallback: only when the pass found candidates, take the locks
 * a job update takes, refresh node allocation counts, let the core decide,
 * and apply its shrinks. The core takes the time from us, as for the pass:
 * one clock, slurmctld's. */
static void _run_fallback(void)
{
	slurmctld_lock_t update_lock = {
		READ_LOCK, WRITE_LOCK, WRITE_LOCK, READ_LOCK, READ_LOCK };
	lachesis_node_state_t *nodes;
	lachesis_shrink_t shrinks[16];
	node_record_t *node_ptr;
	int nn = 0, ns;
	time_t now;

	lock_slurmctld(update_lock);
	now = time(NULL);
	select_g_select_nodeinfo_set_all();
	nodes = xcalloc(MAX(node_record_count, 1), sizeof(*nodes));
	for (int i = 0; (node_ptr = next_node(&i)); i++)
		_fill_node_state(node_ptr, &nodes[nn++]);
	ns = lachesis_fallback(now, nodes, nn, shrinks, ARRAY_SIZE(shrinks));
	for (int i = 0; i < ns; i++)
		_apply_shrink(&shrinks[i]);
	unlock_slurmctld(update_lock);
	xfree(nodes);
}

/* A finished job stays in job_list for MinJobAge (300 s by default), often
 * more jobs than are live. The core needs to see it finished once, to
 * record its completion (internal/controller/core/finished.go), and never
 * ranks it; so a pass sends it only while its end is younger than the last
 * successful pass by FINISHED_GRACE seconds, which covers an end_time a
 * little older than the moment the job turned finished. One the passes miss
 * is closed by the core when it stops seeing the job, at the pass's time. */
#define FINISHED_GRACE 30
static time_t last_pass_ok = 0; /* now of the last pass the core accepted */

static bool _long_finished(job_record_t *job_ptr)
{
	if (IS_JOB_PENDING(job_ptr) || IS_JOB_RUNNING(job_ptr) ||
	    IS_JOB_SUSPENDED(job_ptr))
		return false;
	return last_pass_ok &&
	       (job_ptr->end_time + FINISHED_GRACE < last_pass_ok);
}

/* Shows why, by Lachesis's preemption rule, a waiting job could not take a
 * running job's GPUs (why: the core's reason, "" for none) as its
 * state_desc, which squeue and scontrol show in place of the reason code.
 * Only while Slurm says the job waits for resources, or, for a guest that
 * Lachesis's exclusion leaves no node (the core gives a held job a reason
 * only then), that its constraints fit no node; and never over a
 * description Slurm or an admin wrote: only one of ours (it starts with
 * LACHESIS_REASON_PREFIX) is replaced or cleared. Slurm's schedulers
 * clear state_desc whenever they try the job again; the next pass sets it
 * again. Returns whether it changed anything. Job write lock held. */
static bool _show_blocked(job_record_t *job_ptr, const char *why)
{
	static const size_t plen = sizeof(LACHESIS_REASON_PREFIX) - 1;
	bool ours = job_ptr->state_desc &&
		    !strncmp(job_ptr->state_desc, LACHESIS_REASON_PREFIX, plen);

	if (why[0] && ((job_ptr->state_reason == WAIT_RESOURCES) ||
		       (job_ptr->state_reason == FAIL_BAD_CONSTRAINTS)) &&
	    (!job_ptr->state_desc || ours)) {
		if (ours && !strcmp(job_ptr->state_desc, why))
			return false;
		xfree(job_ptr->state_desc);
		job_ptr->state_desc = xstrdup(why);
		return true;
	}
	if (ours && !why[0]) {
		xfree(job_ptr->state_desc);
		return true;
	}
	return false;
}

/* The cluster's shape for the core's quotas (lachesis_cluster): every
 * node's name and configured GPUs, sent before each pass under the node
 * read lock the pass holds. The core binds the quotas to the first shape
 * it gets and to a changed one; a quota that does not fit the first shape
 * stops slurmctld naming its key, as a bad lachesis.yaml does at start
 * (cluster_refusal carries the reason out of the locks). Where this
 * slurmctld replaces one at a reconfigure (24.05 and later), the old one
 * has already handed over by then: the error is logged and the quotas stay
 * counted in GPUs. A later shape that does not fit is logged once; the
 * quotas keep their binding. */
static bool cluster_sent = false;
static char cluster_refusal[1024];
static char cluster_last_err[1024];
static lachesis_cluster_node_t *cluster_nodes = NULL;
static int cluster_cap = 0;

static uint32_t _node_gpus(node_record_t *node_ptr)
{
	uint64_t gpus = 0;
	list_itr_t *itr;
	gres_state_t *gres_state;

	if (!node_ptr->gres_list)
		return 0;
	itr = list_iterator_create(node_ptr->gres_list);
	while ((gres_state = list_next(itr))) {
		gres_node_state_t *ns = gres_state->gres_data;
		if (xstrcmp(gres_state->gres_name, "gpu") || !ns)
			continue;
		gpus += ns->gres_cnt_avail;
	}
	list_iterator_destroy(itr);
	return (uint32_t) MIN(gpus, UINT32_MAX);
}

/* Node read lock held. */
static void _send_cluster(void)
{
	char err[1024] = "";
	node_record_t *node_ptr;
	int n = 0, rc;

	if (node_record_count <= 0)
		return; /* 24.11 starts the plugin before it reads the nodes */
	if (cluster_cap < node_record_count) {
		xfree(cluster_nodes);
		cluster_cap = node_record_count;
		cluster_nodes = xcalloc(cluster_cap, sizeof(*cluster_nodes));
	}
	for (int i = 0; (node_ptr = next_node(&i)) && (n < cluster_cap); i++) {
		cluster_nodes[n].name = node_ptr->name;
		cluster_nodes[n].index = i;
		cluster_nodes[n++].gpus = _node_gpus(node_ptr);
	}
	rc = lachesis_cluster(cluster_nodes, n, err, sizeof(err));
	if (rc == LACHESIS_OK) {
		cluster_sent = true;
		cluster_last_err[0] = '\0';
		return;
	}
	if (!err[0])
		snprintf(err, sizeof(err), "code %d", rc);
	if (!cluster_sent && !lachesis_replaces_a_slurmctld()) {
		strlcpy(cluster_refusal, err, sizeof(cluster_refusal));
		return;
	}
	if (strcmp(cluster_last_err, err)) {
		strlcpy(cluster_last_err, err, sizeof(cluster_last_err));
		error("%s: %s: %s", plugin_type,
		      cluster_sent ? "the quotas keep their previous binding" :
				     "the quotas are not bound, counted in GPUs",
		      err);
	}
	cluster_sent = true;
}

/* One pass: snapshot every job under the job write lock, one call into Go,
 * write the priorities back. No I/O happens while the lock is held. */
static void _run_pass(void)
{
	slurmctld_lock_t job_write_lock =
		{ NO_LOCK, WRITE_LOCK, READ_LOCK, READ_LOCK, NO_LOCK };
	/* Fair share reads each account's shares from its association; taken
	 * after slurmctld's locks, the order Slurm itself uses. */
	assoc_mgr_lock_t assoc_read_lock = { .assoc = READ_LOCK };
	list_itr_t *itr;
	job_record_t *job_ptr;
	int n = 0, changed = 0, marked = 0, rc, gpu_pos, candidates = 0;
	int ended = 0; /* finished jobs sent for the core to record */
	int changed_desc = 0, usage_shown = 0, nodes_used = 0;
	time_t now;
	DEF_TIMERS;

	gpu_pos = lachesis_hook_gpu_tres_pos();
	lock_slurmctld(job_write_lock);
	START_TIMER;
	now = time(NULL);
	_send_cluster();
	if (cluster_refusal[0]) {
		unlock_slurmctld(job_write_lock);
		fatal("%s: cannot start the Lachesis core: %s", plugin_type,
		      cluster_refusal);
	}
	if (job_list) {
		_grow_buffers(list_count(job_list));
		assoc_mgr_lock(&assoc_read_lock);
		itr = list_iterator_create(job_list);
		while ((job_ptr = list_next(itr)) && (n < pass_cap)) {
			if (IS_JOB_REVOKED(job_ptr) || _long_finished(job_ptr))
				continue;
			lachesis_hook_fill_job(job_ptr, gpu_pos, &pass_jobs[n]);
			if (pass_jobs[n].state == LACHESIS_FINISHED)
				ended++;
			lachesis_hook_fill_alloc(job_ptr, &pass_jobs[n]);
			_add_job_nodes(job_ptr, &pass_jobs[n], &nodes_used);
			pass_jobs[n].account_shares =
				lachesis_hook_account_shares(job_ptr);
			pass_ptrs[n++] = job_ptr;
		}
		list_iterator_destroy(itr);
		assoc_mgr_unlock(&assoc_read_lock);
		_point_job_nodes(n);
	}
	rc = lachesis_pass(now, pass_jobs, n, pass_prios);
	if (rc >= LACHESIS_OK) {
		candidates = rc;
		rc = LACHESIS_OK;
		last_pass_ok = now;
		for (int i = 0; i < n; i++) {
			job_ptr = pass_ptrs[i];
			/* The service marker Slurm saves with the job: the
			 * core's second record, for a ledger that lost writes. */
			if (pass_prios[i].marker[0] &&
			    lachesis_hook_set_marker(job_ptr,
						     pass_prios[i].marker))
				marked++;
			if (IS_JOB_PENDING(job_ptr) &&
			    _show_blocked(job_ptr, pass_prios[i].blocked))
				changed_desc++;
			/* What the job did with its GPUs so far, for admins
			 * (scontrol show job); only when it changed. */
			if (pass_prios[i].usage[0] &&
			    lachesis_hook_set_segment(job_ptr,
						      LACHESIS_USAGE_PREFIX,
						      pass_prios[i].usage))
				usage_shown++;
			/* Its quota state (within its account's quota or
			 * borrowing, and where); only when it changed. */
			if (pass_prios[i].quota[0] &&
			    lachesis_hook_set_segment(job_ptr,
						      LACHESIS_QUOTA_PREFIX,
						      pass_prios[i].quota))
				usage_shown++;
			/* A hold or an admin's priority stays, on a running
			 * job too (it is ranked, not held: lachesis_hook.c). */
			if (!pass_prios[i].priority || pass_jobs[i].held ||
			    !job_ptr->priority || job_ptr->direct_set_prio ||
			    (job_ptr->priority == pass_prios[i].priority))
				continue;
			job_ptr->priority = pass_prios[i].priority;
			/* A stale per-partition array (left by another
			 * priority plugin) would override ours. */
			lachesis_job_drop_priority_array(job_ptr);
			changed++;
		}
		if (changed || marked || changed_desc || usage_shown)
			last_job_update = now;
	}
	END_TIMER;
	unlock_slurmctld(job_write_lock);

	if (rc != LACHESIS_OK)
		error("%s: pass over %d jobs failed (code %d); priorities unchanged",
		      plugin_type, n, rc);
	else
		verbose("%s: pass ranked %d jobs (and recorded %d that finished), changed %d priorities and %d service markers in %s",
			plugin_type, n - ended, ended, changed, marked, TIME_STR);
	if (candidates > 0)
		_run_fallback();
}

static void *_pass_loop(void *arg)
{
	struct timespec deadline;

	slurm_mutex_lock(&pass_mutex);
	while (!pass_stop) {
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_sec += MAX(lachesis_pass_interval(), 1);
		slurm_cond_timedwait(&pass_cond, &pass_mutex, &deadline);
		if (pass_stop)
			break;
		slurm_mutex_unlock(&pass_mutex);
		_run_pass();
		slurm_mutex_lock(&pass_mutex);
	}
	slurm_mutex_unlock(&pass_mutex);
	return NULL;
}

int init(void)
{
	/* sshare and other clients load priority plugins too: start nothing
	 * outside slurmctld. */
	if (core_up || !running_in_slurmctld())
		return SLURM_SUCCESS;
	if (lachesis_hook_start(plugin_type, &core_up) != SLURM_SUCCESS)
		return SLURM_ERROR; /* slurmctld exits, having logged why */
	pass_stop = false;
	slurm_thread_create(&pass_thread, _pass_loop, NULL);
	pass_thread_started = true;
	info("%s loaded (pass every %d s)", plugin_type,
	     lachesis_pass_interval());
	return SLURM_SUCCESS;
}

int fini(void)
{
	if (pass_thread_started) {
		slurm_mutex_lock(&pass_mutex);
		pass_stop = true;
		slurm_cond_signal(&pass_cond);
		slurm_mutex_unlock(&pass_mutex);
		pthread_join(pass_thread, NULL);
		pass_thread_started = false;
	}
	lachesis_hook_stop(&core_up);
	xfree(pass_jobs);
	xfree(pass_prios);
	xfree(pass_ptrs);
	pass_cap = 0;
	xfree(pass_nodes);
	pass_nodes_cap = 0;
	xfree(cluster_nodes);
	cluster_cap = 0;
	cluster_sent = false;
	last_pass_ok = 0;
	return SLURM_SUCCESS;
}

extern uint32_t priority_p_set(uint32_t last_prio, job_record_t *job_ptr)
{
	lachesis_job_t job;
	lachesis_prio_t prio;
	int rc;

	if (job_ptr->direct_set_prio && (job_ptr->priority > 1))
		return job_ptr->priority;
	if (!core_up)
		return 1;
	lachesis_hook_fill_job(job_ptr, lachesis_hook_gpu_tres_pos(), &job);
	job.held = 0; /* Slurm applies holds itself after this call */
	rc = lachesis_enqueue(time(NULL), &job, &prio);
	if ((rc != LACHESIS_OK) || !prio.priority) {
		error("%s: no priority for %pJ (code %d); using 1",
		      plugin_type, job_ptr, rc);
		return 1;
	}
	debug2("%s: %pJ placed in queue %d with priority %u", plugin_type,
	       job_ptr, prio.queue, prio.priority);
	return prio.priority;
}

extern void priority_p_reconfig(bool assoc_clear)
{
	char err[1024] = "";

	/* The job read lock keeps the pass thread (job write lock) out of
	 * the node buffer; Slurm calls this without locks. */
	slurmctld_lock_t node_read_lock =
		{ NO_LOCK, READ_LOCK, READ_LOCK, NO_LOCK, NO_LOCK };

	if (!core_up)
		return;
	/* The new quotas are checked against the nodes: send them first
	 * (a reconfigure before the first pass would find none). */
	lock_slurmctld(node_read_lock);
	_send_cluster();
	unlock_slurmctld(node_read_lock);
	if (lachesis_reconfigure(err, sizeof(err)) != LACHESIS_OK)
		error("%s: config not reloaded, keeping the previous one: %s",
		      plugin_type, err);
	/* Wake the pass thread so a new interval takes effect now. */
	slurm_mutex_lock(&pass_mutex);
	slurm_cond_signal(&pass_cond);
	slurm_mutex_unlock(&pass_mutex);
}

extern void priority_p_set_assoc_usage(slurmdb_assoc_rec_t *assoc)
{
	return;
}

extern double priority_p_calc_fs_factor(long double usage_efctv,
					long double shares_norm)
{
	/* sshare asks this; Lachesis has no fair share, so answer the way
	 * Slurm's classic formula would for display purposes. */
	if ((shares_norm <= 0.0) || fuzzy_equal(shares_norm, NO_VAL))
		return 0.0;
	return pow(2.0, -(usage_efctv / shares_norm));
}

/*
 * sprio's columns are fixed by Slurm, and it sums them into the PRIORITY it
 * prints. Lachesis maps its factors onto them so one `sprio -l` explains a
 * job: ASSOC = Tiresias queue (0 highest), JOBSIZE = attained service in
 * GPU-seconds, FAIRSHARE = the account's fair-share factor x 1000 (under
 * 500: over its share), AGE/PARTITION/QOS/NICE = the weighted factors, and
 * SITE = the rest, so that the sum sprio prints is exactly the priority
 * Slurm schedules the job by (job_ptr->priority, squeue's %Q): Lachesis's
 * decision, or the value an admin set with `scontrol update priority=`.
 * direct_prio is left unset on purpose: with it sprio prints the admin's
 * value next to SITE 0, NICE 0 and the other columns unchanged, a row that
 * does not add up; here SITE carries the difference instead. SITE is a
 * 32-bit column: with more than about 2^31 GPU-seconds of JOBSIZE the sum
 * no longer fits it, and it is clamped (docs/configuration.md says so).
 */
static void _fill_factors(job_record_t *job_ptr, lachesis_prio_t *p,
			  lachesis_factors_t *f)
{
	double age = llround(p->w_age), part = llround(p->w_partition);
	double qos = llround(p->w_qos), js = floor(p->service);
	double fs = llround(p->fairshare * 1000.0);
	double site;

	f->priority_age = age;
	f->priority_part = part;
	f->priority_qos = qos;
	f->priority_assoc = p->queue;
	f->priority_fs = fs;
	f->priority_js = js;
	f->nice = (uint32_t) ((int64_t) p->nice + NICE_OFFSET);
	site = (double) job_ptr->priority - (age + part + qos + fs + js) -
	       (double) p->queue + (double) p->nice;
	site = MAX(MIN(site, (double) INT32_MAX), (double) INT32_MIN);
	f->priority_site = (uint32_t) ((int64_t) site + NICE_OFFSET);
}

/* sprio's rows: the jobs Tiresias ranks (running ones too) that uid may
 * see and, where the release hands sprio's filter to the plugin (22.05),
 * that wanted(job, arg) keeps. Job read lock held (slurm_compat.h's
 * LACHESIS_PRIORITY_FACTORS takes it where Slurm does not). */
static list_t *_factors_list(uid_t uid,
			     bool (*wanted)(job_record_t *, void *), void *arg)
{
	list_t *ret_list = list_create(slurm_destroy_priority_factors_object);
	list_itr_t *itr;
	job_record_t *job_ptr;
	lachesis_prio_t prio;
	priority_factors_object_t *obj;

	if (!core_up || !job_list)
		return ret_list;
	itr = list_iterator_create(job_list);
	while ((job_ptr = list_next(itr))) {
		if (!IS_JOB_PENDING(job_ptr) && !IS_JOB_RUNNING(job_ptr))
			continue;
		if (IS_JOB_REVOKED(job_ptr) || !job_ptr->priority)
			continue;
		if (wanted && !wanted(job_ptr, arg))
			continue;
		if ((slurm_conf.private_data & PRIVATE_DATA_JOBS) &&
		    (job_ptr->user_id != uid) && !validate_operator(uid))
			continue;
		if (lachesis_factors(job_ptr->job_id, &prio) != LACHESIS_OK)
			continue;
		obj = xmalloc(sizeof(*obj));
		obj->job_id = job_ptr->job_id;
		obj->user_id = job_ptr->user_id;
		obj->partition = xstrdup(job_ptr->partition);
		_fill_factors(job_ptr, &prio, lachesis_factors_of(obj, job_ptr));
		list_append(ret_list, obj);
	}
	list_iterator_destroy(itr);
	return ret_list;
}

LACHESIS_PRIORITY_FACTORS(_factors_list)
LACHESIS_PRIORITY_EXTRA

/* Release the run-seconds a job reserved against GrpTRESRunMins limits, as
 * priority/basic does; without this those limits would leak. Called with
 * the job write lock held. */
extern void priority_p_job_end(job_record_t *job_ptr)
{
	uint64_t time_limit_secs = (uint64_t) job_ptr->time_limit * 60;
	uint64_t *unused;
	slurmdb_assoc_rec_t *assoc_ptr;
	assoc_mgr_lock_t locks = { .assoc = WRITE_LOCK, .qos = WRITE_LOCK };

	if (!job_ptr->tres_alloc_cnt || (slurmctld_tres_cnt <= 0))
		return;
	unused = xcalloc(slurmctld_tres_cnt, sizeof(uint64_t));
	for (int i = 0; i < slurmctld_tres_cnt; i++) {
		if (job_ptr->tres_alloc_cnt[i] != NO_CONSUME_VAL64)
			unused[i] = job_ptr->tres_alloc_cnt[i] *
				    time_limit_secs;
	}
	assoc_mgr_lock(&locks);
	if (job_ptr->qos_ptr && job_ptr->qos_ptr->usage) {
		uint64_t *used =
			job_ptr->qos_ptr->usage->grp_used_tres_run_secs;
		for (int i = 0; used && (i < slurmctld_tres_cnt); i++)
			used[i] = (unused[i] > used[i]) ? 0 :
							  used[i] - unused[i];
	}
	for (assoc_ptr = job_ptr->assoc_ptr; assoc_ptr && assoc_ptr->usage;
	     assoc_ptr = assoc_ptr->usage->parent_assoc_ptr) {
		uint64_t *used = assoc_ptr->usage->grp_used_tres_run_secs;
		for (int i = 0; used && (i < slurmctld_tres_cnt); i++)
			used[i] = (unused[i] > used[i]) ? 0 :
							  used[i] - unused[i];
	}
	assoc_mgr_unlock(&locks);
	xfree(unused);
}
