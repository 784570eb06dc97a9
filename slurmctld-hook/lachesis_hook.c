/*
 * lachesis_hook.c - see lachesis_hook.h.
 */
#include <string.h>

#include "src/common/assoc_mgr.h"
#include "src/common/bitstring.h"
#include "src/common/log.h"
#include "src/common/run_in_daemon.h"
#include "src/common/strlcpy.h"
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"

#include "lachesis_hook.h"
#include "reason_text.h"

void lachesis_hook_log(int level, const char *msg)
{
	switch (level) {
	case LACHESIS_LOG_ERROR:
		error("%s", msg);
		break;
	case LACHESIS_LOG_WARN:
	case LACHESIS_LOG_INFO:
		info("%s", msg);
		break;
	default:
		debug("%s", msg);
		break;
	}
}

/* The reason the core last refused to start in this process. When init()
 * fails, Slurm tries the plugin again from every file of its plugin
 * directory (plugin_context_create: "Couldn't find the specified plugin
 * name ... looking at all files") and calls init() a second time: the
 * reason is logged once, so that each refusal is one line. */
static char last_refusal[1024];

static void _log_refusal(const char *plugin, const char *what,
			 const char *why)
{
	if (!strcmp(last_refusal, why)) {
		debug("%s: %s (again): %s", plugin, what, why);
		return;
	}
	strlcpy(last_refusal, why, sizeof(last_refusal));
	error("%s: %s: %s", plugin, what, why);
}

int lachesis_hook_start(const char *plugin, bool *up)
{
	char err[1024] = "";
	lachesis_env_t env = {
		.abi_version = LACHESIS_ABI_VERSION,
		.slurm_user_id = slurm_conf.slurm_user_id,
		.slurm_conf = slurm_conf.slurm_conf,
		.auth_info = slurm_conf.authinfo,
		.cluster_name = slurm_conf.cluster_name,
		.log = lachesis_hook_log,
		.reconfigure = lachesis_replaces_a_slurmctld(),
	};
	int rc;

	if (*up || !running_in_slurmctld())
		return SLURM_SUCCESS;
	rc = lachesis_init(&env, err, sizeof(err));
	if ((rc == LACHESIS_ECONFIG) && env.reconfigure) {
		/* This slurmctld stops; the one it was to replace goes on with
		 * the configuration it has ("reconfigure failed"). */
		_log_refusal(plugin, "config not reloaded, keeping the previous one",
			     err[0] ? err : "unknown error");
		return SLURM_ERROR;
	}
	if (rc != LACHESIS_OK) {
		_log_refusal(plugin, "cannot start the Lachesis core",
			     err[0] ? err : "unknown error");
		return SLURM_ERROR;
	}
	*up = true;
	/* Slurm loads a plugin only into the release it was built for, to
	 * the micro version (src/common/plugin.c): say which that is. */
	verbose("%s loaded (built for Slurm %s)", plugin,
		LACHESIS_SLURM_BUILT_FOR);
	return SLURM_SUCCESS;
}

void lachesis_hook_stop(bool *up)
{
	if (*up) {
		lachesis_fini();
		*up = false;
	}
}

int lachesis_hook_gpu_tres_pos(void)
{
	slurmdb_tres_rec_t tres_rec;

	memset(&tres_rec, 0, sizeof(tres_rec));
	tres_rec.type = "gres";
	tres_rec.name = "gpu";
	return assoc_mgr_find_tres_pos(&tres_rec, false);
}

static uint8_t _end_state(job_record_t *job_ptr)
{
	if (!IS_JOB_FINISHED(job_ptr))
		return LACHESIS_END_NONE;
	switch (job_ptr->job_state & JOB_STATE_BASE) {
	case JOB_COMPLETE:
		return LACHESIS_END_COMPLETED;
	case JOB_CANCELLED:
		return LACHESIS_END_CANCELLED;
	default:
		return LACHESIS_END_FAILED;
	}
}

static uint8_t _state(job_record_t *job_ptr)
{
	if (IS_JOB_PENDING(job_ptr))
		return LACHESIS_PENDING;
	if (IS_JOB_SUSPENDED(job_ptr))
		return LACHESIS_SUSPENDED;
	if (IS_JOB_RUNNING(job_ptr))
		return LACHESIS_RUNNING;
	return LACHESIS_FINISHED;
}

void lachesis_hook_fill_job(job_record_t *job_ptr, int gpu_pos,
			    lachesis_job_t *out)
{
	job_details_t *details = job_ptr->details;
	uint64_t *cnt;

	memset(out, 0, sizeof(*out));
	out->job_id = job_ptr->job_id;
	out->user_id = job_ptr->user_id;
	out->state = _state(job_ptr);
	/* A hold (priority 0) or an admin's priority takes a waiting job out
	 * of the ranking. A running job stays ranked, and so preemptable,
	 * whatever its priority: Slurm lets a job's owner set priority 0 on
	 * their running job (`scontrol hold`), which must not make it immune
	 * to preemption. The pass never writes over such a priority. */
	out->held = IS_JOB_PENDING(job_ptr) &&
		    ((job_ptr->priority == 0) || job_ptr->direct_set_prio);

	/* Pending jobs have only a request; running and finished jobs have
	 * an allocation, which is what service is charged for. */
	cnt = (out->state == LACHESIS_PENDING) ? job_ptr->tres_req_cnt :
						 job_ptr->tres_alloc_cnt;
	if ((gpu_pos >= 0) && cnt && (cnt[gpu_pos] != NO_CONSUME_VAL64) &&
	    (cnt[gpu_pos] < LACHESIS_GPUS_UNKNOWN))
		out->gpus = (uint32_t) cnt[gpu_pos];
	else
		out->gpus = LACHESIS_GPUS_UNKNOWN;
	out->tres_per_job = job_ptr->tres_per_job;
	out->tres_per_node = job_ptr->tres_per_node;
	out->tres_per_socket = job_ptr->tres_per_socket;
	out->tres_per_task = job_ptr->tres_per_task;

	if (details) {
		out->nice = (int32_t) ((int64_t) details->nice - NICE_OFFSET);
		out->num_nodes = job_ptr->node_cnt ? job_ptr->node_cnt :
							details->min_nodes;
		out->num_tasks = details->num_tasks;
		out->submit_time = details->submit_time;
		out->begin_time = details->begin_time;
	}
	out->start_time = job_ptr->start_time;
	out->end_time = job_ptr->end_time;
	out->suspend_time = job_ptr->suspend_time;
	out->pre_sus_time = job_ptr->pre_sus_time;
	if (out->state == LACHESIS_PENDING) {
		out->waits_for_resources =
			(job_ptr->state_reason == WAIT_RESOURCES);
		/* Tasks held back by their array's throttle are ready in
		 * all but that: core/inherit.go tells them from copies. */
		if ((job_ptr->state_reason == WAIT_ARRAY_TASK_LIMIT) &&
		    job_ptr->array_recs)
			out->array_throttle =
				job_ptr->array_recs->max_run_tasks;
		/* Start-time sizing: jobs that wait for resources, and
		 * requeued ones, which it may raise before they start. */
		if (out->waits_for_resources || job_ptr->restart_cnt) {
			out->admin_comment = job_ptr->admin_comment;
			out->cpus_per_tres = job_ptr->cpus_per_tres;
			out->mem_per_tres = job_ptr->mem_per_tres;
		}
		/* The model key of a waiting job: the core reads it (once per
		 * job) for opportunistic ones, whose pair with the guaranteed
		 * jobs on each node it judges (gpushare/exclude.go). Pointers
		 * only: nothing is copied here. */
		out->name = job_ptr->name;
		out->comment = job_ptr->comment;
	}
	out->system_comment = job_ptr->system_comment;
	out->account = job_ptr->account;
	out->partition = job_ptr->partition;
	out->array_job_id = job_ptr->array_job_id;
	out->preempt_time = job_ptr->preempt_time;
	out->requeue_allowed = (details && details->requeue) ? 1 : 0;
	out->end_state = _end_state(job_ptr);
	if (job_ptr->part_ptr) {
		out->part_factor = job_ptr->part_ptr->norm_priority;
		out->partition_tier = job_ptr->part_ptr->priority_tier;
	}
	if (job_ptr->qos_ptr && job_ptr->qos_ptr->usage)
		out->qos_factor = job_ptr->qos_ptr->usage->norm_priority;
}

/* The type of the job's allocated GPUs as its typed GRES names it: a job
 * that asked for a type (--gpus=a:1) carries it in gres_list_alloc. NULL
 * for an untyped request. */
static const char *_alloc_gpu_type(job_record_t *job_ptr)
{
	gres_state_t *gres_state;
	const char *type = NULL;
	list_itr_t *itr;

	if (!job_ptr->gres_list_alloc)
		return NULL;
	itr = list_iterator_create(job_ptr->gres_list_alloc);
	while ((gres_state = list_next(itr))) {
		gres_job_state_t *js = gres_state->gres_data;
		if (!xstrcmp(gres_state->gres_name, "gpu") && js &&
		    js->type_name && js->type_name[0]) {
			type = js->type_name;
			break;
		}
	}
	list_iterator_destroy(itr);
	return type;
}

/* The node's GPU type when it has exactly one (the usual homogeneous
 * node); NULL otherwise. */
static const char *_node_gpu_type(gres_node_state_t *ns)
{
	const char *type = NULL;

	for (int i = 0; i < ns->type_cnt; i++) {
		if (!ns->type_name || !ns->type_name[i] || !ns->type_name[i][0])
			continue;
		if (type && xstrcmp(type, ns->type_name[i]))
			return NULL; /* several types: cannot tell which */
		type = ns->type_name[i];
	}
	return type;
}

void lachesis_hook_fill_alloc(job_record_t *job_ptr, lachesis_job_t *out)
{
	node_record_t *node_ptr = NULL;
	gres_state_t *gres_state;
	list_itr_t *itr;
	int first;

	if (out->state == LACHESIS_PENDING)
		return;
	out->cpus = job_ptr->total_cpus;
	out->name = job_ptr->name;
	out->comment = job_ptr->comment;
	out->gpu_type = _alloc_gpu_type(job_ptr);
	/* One node stands for the allocation: a job's nodes are normally
	 * of one partition, and this is only a rate. */
	if (job_ptr->node_bitmap &&
	    ((first = bit_ffs(job_ptr->node_bitmap)) >= 0) &&
	    (first < node_record_count))
		node_ptr = node_record_table_ptr[first];
	if (!node_ptr)
		return;
	/* Where it runs, for quota reclaim in cells (a whole node's GPUs). */
	out->first_node = first;
	out->node_count = bit_set_count(job_ptr->node_bitmap);
	out->node_cpus = node_ptr->cpus;
	if (!node_ptr->gres_list)
		return;
	itr = list_iterator_create(node_ptr->gres_list);
	while ((gres_state = list_next(itr))) {
		gres_node_state_t *ns = gres_state->gres_data;
		if (xstrcmp(gres_state->gres_name, "gpu") || !ns)
			continue;
		if (ns->gres_cnt_avail < UINT32_MAX)
			out->node_gpus += (uint32_t) ns->gres_cnt_avail;
		/* An untyped request on typed GPUs: the node says which. */
		if (!out->gpu_type)
			out->gpu_type = _node_gpu_type(ns);
	}
	list_iterator_destroy(itr);
}

int lachesis_hook_job_nodes(job_record_t *job_ptr, int32_t *out, int cap)
{
	int n = 0, first, last;

	if (!job_ptr->node_bitmap ||
	    ((first = bit_ffs(job_ptr->node_bitmap)) < 0))
		return 0;
	last = MIN(bit_fls(job_ptr->node_bitmap), node_record_count - 1);
	for (int i = first; (i <= last) && (n < cap); i++) {
		if (bit_test(job_ptr->node_bitmap, i))
			out[n++] = i;
	}
	return n;
}

uint32_t lachesis_hook_account_shares(job_record_t *job_ptr)
{
	slurmdb_assoc_rec_t *assoc = job_ptr->assoc_ptr;

	/* The job's association is its user's; the account's own is the
	 * first ancestor without a user. */
	while (assoc && assoc->user) {
		assoc = assoc->usage ? assoc->usage->parent_assoc_ptr : NULL;
	}
	if (!assoc || !assoc->acct || xstrcasecmp(assoc->acct, job_ptr->account))
		return 0;
	if ((assoc->shares_raw == SLURMDB_FS_USE_PARENT) ||
	    (assoc->shares_raw == NO_VAL) || (assoc->shares_raw == INFINITE))
		return 0;
	return assoc->shares_raw;
}

/* Longest SystemComment (or AdminComment, for the usage and quota segments) we
 * rewrite: a longer one is an admin's business, and left exactly as it is. */
#define LACHESIS_SYSCOMMENT_MAX 4096

/* Replaces the part of *field that starts with prefix by text, keeping the
 * text around it: the part runs up to stop (which stays, for a separator
 * such as ';') or through it (stop_in_part, for a closing bracket), or to
 * the end of the field. Without such a part, text is appended after "; ".
 * False, and nothing changed, when the field is longer than max. */
static bool _set_part(char **field, size_t max, const char *prefix,
		      const char *text, char stop, bool stop_in_part)
{
	char *old = *field, *out = NULL;
	const char *at, *end;

	if (old && (strlen(old) > max))
		return false;
	at = old ? strstr(old, prefix) : NULL;
	if (at) {
		/* Replace our part only; the admin's text around it stays. */
		end = strchr(at + strlen(prefix), stop);
		if (end && stop_in_part)
			end++;
		if (at > old)
			xstrncat(out, old, at - old);
		xstrcat(out, text);
		if (end)
			xstrcat(out, end);
	} else if (old && old[0]) {
		xstrfmtcat(out, "%s; %s", old, text);
	} else {
		out = xstrdup(text);
	}
	xfree(*field);
	*field = out;
	return true;
}

bool lachesis_hook_set_marker(job_record_t *job_ptr, const char *marker)
{
	return _set_part(&job_ptr->system_comment, LACHESIS_SYSCOMMENT_MAX,
			 LACHESIS_MARKER_PREFIX, marker, ';', false);
}

bool lachesis_hook_set_segment(job_record_t *job_ptr, const char *prefix,
			       const char *segment)
{
	/* The core's segment never holds ']' before its end, nor anything
	 * else a user could spell: users' text in an AdminComment has every
	 * bracket removed (reason_text.h). */
	if (strncmp(segment, prefix, strlen(prefix)) ||
	    strchr(segment, ']') != segment + strlen(segment) - 1)
		return false;
	return _set_part(&job_ptr->admin_comment, LACHESIS_SYSCOMMENT_MAX,
			 prefix, segment, ']', true);
}

void lachesis_hook_append_reason(char **comment, const char *reason,
				 bool keep_marker)
{
	size_t cap;
	char *clean;

	if (!reason || !reason[0])
		return;
	cap = strlen(reason) + 1;
	clean = xmalloc(cap);
	lachesis_reason_clean(clean, cap, reason, keep_marker);
	if (clean[0]) {
		if (*comment && (*comment)[0])
			xstrfmtcat(*comment, "; %s", clean);
		else {
			xfree(*comment);
			*comment = xstrdup(clean);
		}
	}
	xfree(clean);
}
