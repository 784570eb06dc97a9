/*
 * lachesis_core.h - the C ABI of Lachesis's Go core (liblachesis_core.so).
 *
 * The thin Slurm plugins in slurmctld-hook/ include this header; the Go side
 * (cgo/) includes it too, so both agree on every struct layout. The C side
 * copies what it needs out of Slurm's records into these flat structs and
 * makes one call; it holds no policy. Every entry point returns an error
 * code instead of crashing: a panic in Go is recovered and reported as
 * LACHESIS_EPANIC.
 */
#ifndef LACHESIS_CORE_H
#define LACHESIS_CORE_H

#include <stdint.h>

/* 2: lachesis_fallback takes now, like lachesis_pass.
 * 3: lachesis_preemption_possible.
 * 4: lachesis_job_t.cpus, node_cpus, node_gpus (jobs without GPUs are
 *    charged service in GPU-equivalents).
 * 5: fair share: lachesis_job_t.account/account_shares,
 *    lachesis_prio_t.fairshare.
 * 6: effective service: lachesis_job_t.gpu_type, name, comment.
 * 7: lachesis_victim_order.
 * 8: job_submit/synergy sizes on the core's own goroutine
 *    (lachesis_sizer_start/stop, lachesis_size_slot_t).
 * 9: lachesis_job_t.user_id (sweeps are per user).
 *    (lachesis_place_job, the lachesis_place_* structs and
 *    lachesis_sizing_t.placement came in at 4, without a bump of their own.)
 * 10: partitions, arrays, preemption and how a job ended:
 *    lachesis_job_t.partition, partition_tier, array_job_id,
 *    preempt_time, requeue_allowed, end_state; lachesis_prio_t.blocked;
 *    lachesis_preempting.
 * 11: start-time sizing: lachesis_shrink_t.raise; lachesis_job_t's
 *    admin_comment, name and comment also for pending jobs that were
 *    requeued (restart_cnt > 0).
 * 12: lachesis_place is lachesis_enqueue ("place" is GPU-type placement,
 *    lachesis_place_job; the priority of a job between passes is its
 *    enqueueing). Same arguments and semantics.
 * 13: lachesis_prio_t.usage: a running job's GPU-use segment for its
 *    AdminComment (per-job GPU use reported by node agents).
 * 14: whole GPUs into shards at submit: lachesis_submit_t.exclusive,
 *    LACHESIS_SIZE_SHARDS and lachesis_sizing_t.shards.
 * 15: several sizing slots (Slurm 23.02 calls job_submit on several RPC
 *    threads at once): lachesis_sizer_start takes an array of slots and
 *    the ask eventfd; each slot carries its own done_fd.
 * 16: the C side reads no CPUs or memory per GPU itself (policy/gres is
 *    the one reader): lachesis_job_t.cpus_per_tres and mem_per_tres, and
 *    lachesis_shrink_t's copies of them as the core judged them.
 * 17: lachesis_env_t.reconfigure (Slurm 24.05 and later reconfigure by
 *    starting a new slurmctld beside the running one).
 * 18: lachesis_cluster and lachesis_cluster_node_t (the nodes' GPUs, for quotas
 *    in cells); lachesis_job_t.first_node and node_count.
 * 19: lachesis_prio_t.quota: a GPU job's quota segment for its
 *    AdminComment (LACHESIS_QUOTA_PREFIX).
 *    lachesis_job_t.nodes: every node of a running job on several nodes
 *    (quota reclaim under topology/tree switches). */
#define LACHESIS_ABI_VERSION 19

/* Return codes. */
#define LACHESIS_OK         0
#define LACHESIS_ENOTFOUND  1  /* no decision for that job (yet) */
#define LACHESIS_EINVAL    -1
#define LACHESIS_ECONFIG   -2
#define LACHESIS_EPANIC    -3
#define LACHESIS_ENOTINIT  -4

/* Job states (lachesis_job_t.state). */
#define LACHESIS_PENDING   0
#define LACHESIS_RUNNING   1
#define LACHESIS_SUSPENDED 2
#define LACHESIS_FINISHED  3

/* How a finished job ended (lachesis_job_t.end_state); 0 while it has not. */
#define LACHESIS_END_NONE      0
#define LACHESIS_END_COMPLETED 1  /* JOB_COMPLETE: ran to its end */
#define LACHESIS_END_CANCELLED 2  /* JOB_CANCELLED (scancel) */
#define LACHESIS_END_FAILED    3  /* failed, timeout, node fail, OOM, ... */

/* gpus value meaning "gres/gpu is not a tracked TRES: parse the strings". */
#define LACHESIS_GPUS_UNKNOWN UINT32_MAX

/* Log levels passed to the log callback. */
#define LACHESIS_LOG_ERROR 0
#define LACHESIS_LOG_WARN  1
#define LACHESIS_LOG_INFO  2
#define LACHESIS_LOG_DEBUG 3

/* Writes one line to slurmctld's log; called from any thread. */
typedef void (*lachesis_log_fn)(int level, const char *msg);

/* One job as copied out of job_record_t. Times are Unix seconds, 0 = unset.
 * The string pointers need only live for the duration of the call.
 * (Prototypes below take non-const pointers because cgo's generated export
 * header declares them so; the core never writes through them.) */
typedef struct lachesis_job {
	uint32_t job_id;
	uint32_t gpus;          /* or LACHESIS_GPUS_UNKNOWN */
	uint8_t  state;         /* LACHESIS_PENDING ... LACHESIS_FINISHED */
	uint8_t  held;          /* held or admin-set priority: never rewritten */
	uint16_t reserved;
	int32_t  nice;          /* details->nice - NICE_OFFSET */
	uint32_t num_nodes;
	uint32_t num_tasks;
	/* Running, suspended and finished jobs, filled by the pass only:
	 * the job's allocated CPUs, and the CPUs and GPUs of the first node
	 * of its allocation (0 = unknown). A job without GPUs is charged
	 * service at cpus / (node_cpus / node_gpus) GPU-equivalents. */
	uint32_t cpus;
	uint32_t node_cpus;
	uint32_t node_gpus;
	uint32_t user_id;       /* the job's owner: sweeps are per user */
	int64_t  submit_time;
	int64_t  begin_time;
	int64_t  start_time;
	int64_t  end_time;
	int64_t  suspend_time;
	int64_t  pre_sus_time;
	double   part_factor;   /* partition's normalised priority, 0..1 */
	double   qos_factor;    /* QOS's normalised priority, 0..1 */
	const char *tres_per_job;
	const char *tres_per_node;
	const char *tres_per_socket;
	const char *tres_per_task;
	/* Pending jobs only: for start-time sizing (lowering a job whose
	 * request fits nowhere while its GPUs are free; raising a requeued or
	 * lowered job toward its best case). admin_comment is given for jobs
	 * waiting for resources or requeued. */
	uint8_t  waits_for_resources; /* state_reason == WAIT_RESOURCES */
	uint8_t  reserved2[3];
	/* A job array's pending tasks waiting only on the array's throttle
	 * (state_reason == WAIT_ARRAY_TASK_LIMIT): the throttle (%N,
	 * array_recs->max_run_tasks); 0 for any other job. Same layout as
	 * before: no ABI change. */
	uint32_t array_throttle;
	const char *admin_comment;
	/* The job's SystemComment; the core reads only its part, from
	 * LACHESIS_MARKER_PREFIX up to the next ';' (see core/restore.go). */
	const char *system_comment;
	/* The job's Slurm account (job_ptr->account, NULL for none); the core
	 * reads at most 128 bytes of it. */
	const char *account;
	/* Shares of the account's association (slurmdbd), 0 when there is
	 * none or it sets none: lachesis.yaml's fairshare.shares then apply. */
	uint32_t account_shares;
	uint32_t reserved4;
	/* Running, suspended and finished jobs, filled by the pass only: the
	 * GPU type of the job's allocation (its allocated typed GRES, else the
	 * only GPU type of its first node; NULL when untyped), and the job's
	 * name and comment, from which the core reads its model key. The core
	 * reads them once per run, when effective service weights it.
	 * name and comment are also given for every pending job (pointers,
	 * no copy): start-time sizing's model key, and a waiting
	 * opportunistic job's, which the core pairs with the guaranteed jobs
	 * on each node (gpushare/exclude.go). Same layout as before: no ABI
	 * change. */
	const char *gpu_type;
	const char *name;
	const char *comment;
	/* The job's partition (job_ptr->partition, NULL for none; a job
	 * submitted to several lists them comma-separated; the core reads at
	 * most 128 bytes) and its PriorityTier (part_ptr->priority_tier). */
	const char *partition;
	uint32_t partition_tier;
	/* job_ptr->array_job_id: the array a task belongs to, 0 for a job
	 * that is not an array task. */
	uint32_t array_job_id;
	/* job_ptr->preempt_time: when Slurm preempted the job's current run
	 * (0 = not preempted). Slurm clears it when a requeue completes, so
	 * it is seen by lachesis_enqueue at the requeue and by a pass only
	 * while the requeued job is still completing. */
	int64_t  preempt_time;
	uint8_t  requeue_allowed;  /* details->requeue: may be requeued */
	uint8_t  end_state;        /* finished jobs: LACHESIS_END_* */
	uint8_t  reserved5[6];
	/* Pending jobs given an admin_comment (above): their CPUs and memory
	 * per GPU as Slurm holds them (job_ptr->cpus_per_tres, mem_per_tres:
	 * "gres:gpu:4" in 22.05, "gres/gpu:4" from 23.02), which start-time
	 * sizing reads with policy/gres: a lowering never raises either. */
	const char *cpus_per_tres;
	const char *mem_per_tres;
	/* Running jobs: the index in Slurm's node table of the first node of
	 * the allocation (lachesis_cluster_node_t.index) and how many nodes
	 * it has; node_count 0 for other jobs. */
	int32_t  first_node;
	uint32_t node_count;
	/* Running jobs on several nodes: all node_count indexes (first_node
	 * first), in a buffer the caller keeps until lachesis_pass returns;
	 * NULL for other jobs. */
	const int32_t *nodes;
} lachesis_job_t;

/* Lachesis's part of a job's SystemComment starts with this. */
#define LACHESIS_MARKER_PREFIX "lachesis:v1 "

/* One node's capacity and use, for the Synergy fallback. */
typedef struct lachesis_node_state {
	uint32_t cpus;
	uint32_t alloc_cpus;
	uint32_t gpus;
	uint32_t alloc_gpus;
	uint64_t mem_mb;
	uint64_t alloc_mem_mb;
	uint8_t  usable;            /* up, not drained */
	uint8_t  reserved[7];
} lachesis_node_state_t;

/* Longest cpus_per_tres or mem_per_tres a shrink carries, NUL included:
 * the core resizes no job whose strings are longer (Lachesis writes
 * "gres/gpu:N"; a longer one is not its sizing). */
#define LACHESIS_SHRINK_TRES_MAX 64

/* A pending job the core wants resized by start-time sizing: lowered to
 * what a node with its GPUs free spares now (synergy.Fallback), or, when
 * raise is set, raised toward its profile's best case (synergy.Restore,
 * numbers from the profile and the nodes, never from the job's text). */
typedef struct lachesis_shrink {
	uint32_t job_id;
	uint32_t cpus_per_gpu;
	uint64_t mem_mb_per_gpu;
	char admin_comment[1024];   /* the job's new admin comment */
	uint8_t  raise;
	uint8_t  reserved[7];
	/* The job's cpus_per_tres and mem_per_tres as the pass gave them
	 * ("" for none), which the core judged the resize against: the plugin
	 * resizes only a job whose strings are still exactly these (compared,
	 * never parsed), so an update between the pass and the resize leaves
	 * the job to the next pass. */
	char cpus_per_tres[LACHESIS_SHRINK_TRES_MAX];
	char mem_per_tres[LACHESIS_SHRINK_TRES_MAX];
} lachesis_shrink_t;

/* The decision for one job. priority == 0 means "leave the job alone". */
typedef struct lachesis_prio {
	uint32_t priority;
	int32_t  queue;             /* Tiresias queue, 0 = highest */
	double   service;           /* attained GPU-seconds over all runs */
	double   queue_service;     /* GPU-seconds counted toward the queue */
	double   gittins;           /* 2D-Gittins index (0 in las mode) */
	/* Weighted components: tiresias + age + partition + qos - nice
	 * is the priority before rounding. */
	double   w_tiresias;
	double   w_age;
	double   w_partition;
	double   w_qos;
	int32_t  nice;
	/* When not empty: the job's new marker, to replace Lachesis's part of
	 * its SystemComment (Slurm saves it with the job; core/restore.go). */
	char     marker[192];
	/* Fair-share factor of the job's account in [0,1]; under 0.5 the
	 * account is over its share (policy/priority/fairshare.go). */
	double   fairshare;
	/* Pass, waiting jobs: when not empty, why a preemption the job asked
	 * for lately was refused (min_run, max_per_job, queue_gap), or, for
	 * an opportunistic job, that it waits for GPUs no guaranteed job
	 * needs, when it is upgraded and the node Lachesis keeps it off
	 * (starts with LACHESIS_REASON_PREFIX). The plugin shows it as the
	 * job's reason (state_desc) while Slurm says it waits for resources,
	 * or, for a guest whose exclusion leaves it no node, that its
	 * constraints fit none (BadConstraints). */
	char     blocked[128];
	/* Pass, running jobs: when not empty, the job's GPU use so far as
	 * node agents measured it (gpushare/gpuuse.go), one segment from
	 * LACHESIS_USAGE_PREFIX through its closing ']', to replace
	 * Lachesis's segment of the job's AdminComment. Set only when it
	 * changed. */
	char     usage[160];
	/* Pass, GPU jobs when quotas are on: when not empty, the job's quota
	 * state (core/quotaplace.go: within its account's quota, or
	 * borrowing and where), one segment from LACHESIS_QUOTA_PREFIX
	 * through its closing ']', to replace Lachesis's quota segment of the
	 * job's AdminComment. Set only when it changed. */
	char     quota[200];
} lachesis_prio_t;

/* Lachesis's GPU-use segment of an AdminComment starts with this
 * (gpushare.UsagePrefix) and ends with the next ']'. */
#define LACHESIS_USAGE_PREFIX "[GPU use: "

/* Lachesis's quota segment of an AdminComment starts with this
 * (core.QuotaSegmentPrefix) and ends with the next ']'. */
#define LACHESIS_QUOTA_PREFIX "[quota: "

/* Every reason the core gives a job starts with this (reasontext.WaitingPrefix):
 * the plugin replaces or clears only a state_desc that does. */
#define LACHESIS_REASON_PREFIX "Lachesis: "

/* job_submit/synergy: one node of the job's partition. */
typedef struct lachesis_node {
	uint32_t cpus;
	uint32_t reserved;
	uint64_t mem_mb;            /* RealMemory */
	const char *gres;           /* configured gres, e.g. "gpu:4" */
} lachesis_node_t;

/* job_submit/synergy: the job as submitted (job_desc_msg_t). Unset numbers
 * are 0 (the C side maps NO_VAL* to 0). */
typedef struct lachesis_submit {
	uint32_t user_id;
	uint16_t cpus_per_task;
	uint8_t  mem_per_cpu;       /* mem_mb is per CPU (--mem-per-cpu) */
	uint8_t  exclusive;         /* --exclusive (job_desc->shared == 0) */
	uint32_t min_nodes;
	uint32_t num_tasks;
	uint64_t mem_mb;            /* --mem / --mem-per-cpu */
	const char *name;
	const char *comment;
	const char *partition;
	const char *tres_per_job;
	const char *tres_per_node;
	const char *tres_per_socket;
	const char *tres_per_task;
	const char *cpus_per_tres;
	const char *mem_per_tres;
} lachesis_submit_t;

/* job_submit/synergy: what to do with the job. */
#define LACHESIS_SIZE_LEAVE   0
#define LACHESIS_SIZE_SET     1
#define LACHESIS_SIZE_REJECT  2
/* Replace the job's one GPU by `shards` gres/shard of one GPU: its GPU
 * request strings and cpus_per_tres/mem_per_tres go; cpus_per_gpu, when
 * not 0, is its cpus_per_task and mem_mb_per_gpu its memory per node (one
 * task on one node). No sizing marker: start-time sizing leaves it. */
#define LACHESIS_SIZE_SHARDS  3

typedef struct lachesis_sizing {
	int32_t  action;            /* LACHESIS_SIZE_* */
	uint32_t cpus_per_gpu;      /* 0: leave the job's CPUs alone */
	uint64_t mem_mb_per_gpu;    /* 0: leave the job's memory alone */
	uint8_t  clear_cpus_per_task;
	uint8_t  clear_mem;
	uint8_t  placement;         /* 1: placement is on, call lachesis_place_job */
	uint8_t  reserved;
	char reason[512];           /* for the admin comment ("" = none) */
	char error[512];            /* for the user, with LACHESIS_SIZE_REJECT */
	uint32_t shards;            /* with LACHESIS_SIZE_SHARDS */
	uint32_t reserved2;
} lachesis_sizing_t;

/*
 * job_submit/synergy's sizing slots: each holds one job, handed from an RPC
 * thread to the core's sizing goroutine and back without the RPC thread
 * entering Go (see lachesis_sizer_start); several RPC threads may each hold
 * one at once. state is read and changed only with atomic operations, by
 * both sides; the other fields belong to whoever state says (done_fd is
 * set before the goroutine starts and never changes while it runs):
 *
 *   IDLE      -> ASKED      RPC thread: req, nodes, n filled; ask_fd written
 *   ASKED     -> BUSY       goroutine: picked it up
 *   BUSY      -> DONE       goroutine: out and rc filled; done_fd written
 *   DONE      -> IDLE       RPC thread: answer taken, request freed
 *   ASKED     -> IDLE       RPC thread gave up before the goroutine came
 *   BUSY      -> ABANDONED  RPC thread gave up while the goroutine sizes
 *   ABANDONED -> STALE      goroutine: finished one nobody waits for
 *   STALE     -> IDLE       next RPC thread: request freed
 */
#define LACHESIS_SLOT_IDLE      0
#define LACHESIS_SLOT_ASKED     1
#define LACHESIS_SLOT_BUSY      2
#define LACHESIS_SLOT_DONE      3
#define LACHESIS_SLOT_ABANDONED 4
#define LACHESIS_SLOT_STALE     5

typedef struct lachesis_size_slot {
	int32_t  state;             /* LACHESIS_SLOT_*, atomic */
	int32_t  rc;                /* lachesis_size_job's return code */
	int32_t  n;                 /* nodes */
	int32_t  done_fd;           /* eventfd the goroutine writes at DONE */
	lachesis_submit_t req;
	lachesis_node_t *nodes;
	lachesis_sizing_t out;
} lachesis_size_slot_t;

/* job_submit/synergy placement: one node of the job's partition(s). */
typedef struct lachesis_place_node {
	uint32_t cpus;
	uint32_t reserved;
	uint64_t mem_mb;            /* RealMemory */
	const char *gres;           /* configured gres, e.g. "gpu:a:2" */
	const char *features;       /* configured features, e.g. "gpu_a,ib" */
} lachesis_place_node_t;

/* job_submit/synergy placement: the job after sizing. Unset numbers are 0. */
typedef struct lachesis_place_req {
	uint32_t min_nodes;
	uint32_t max_nodes;
	uint32_t num_tasks;
	uint32_t reserved;
	const char *name;
	const char *comment;
	const char *partition;
	const char *tres_per_job;
	const char *tres_per_node;
	const char *tres_per_socket;
	const char *tres_per_task;
	const char *cpus_per_tres;
	const char *mem_per_tres;
	const char *features;       /* --constraint */
	const char *prefer;         /* --prefer */
	const char *req_nodes;      /* --nodelist */
} lachesis_place_req_t;

/* job_submit/synergy placement: what to set ("" / 0: leave alone). */
typedef struct lachesis_place {
	uint32_t max_nodes;
	uint32_t reserved;
	char prefer[256];           /* new --prefer */
	char reason[512];           /* for the admin comment */
} lachesis_place_t;

/* What slurmctld tells the core at start-up. */
typedef struct lachesis_env {
	uint32_t abi_version;      /* LACHESIS_ABI_VERSION of the caller */
	uint32_t slurm_user_id;    /* SlurmUser: may report to the core */
	const char *slurm_conf;    /* slurm.conf; lachesis.yaml sits next to it */
	const char *auth_info;     /* AuthInfo, e.g. "socket=/run/munge/..." */
	const char *cluster_name;
	lachesis_log_fn log;       /* into slurmctld's log */
	/* 1: this slurmctld was started by `scontrol reconfigure` to replace a
	 * running one, which keeps its listeners until this one is up (Slurm
	 * 24.05 and later; slurm_compat.h says how the plugin knows). The
	 * config is then a reload. */
	uint32_t reconfigure;
	uint32_t reserved;
} lachesis_env_t;

/* Starts the core (idempotent: later calls only add a reference). It reads
 * lachesis.yaml next to env->slurm_conf (or $LACHESIS_CONFIG). On error a
 * message naming the bad key goes into errbuf. */
extern int lachesis_init(lachesis_env_t *env, char *errbuf, int errlen);
/* Drops a reference; the last one flushes the ledger and stops the core. */
extern void lachesis_fini(void);
/* Re-reads the config; on error the old one stays and errbuf says why. */
extern int lachesis_reconfigure(char *errbuf, int errlen);
/* One node of Slurm's node table: its name and its configured gres/gpu. */
typedef struct {
	const char *name;
	uint32_t gpus;
	int32_t  index;	/* in Slurm's node table (job's first_node) */
} lachesis_cluster_node_t;

/* The cluster's shape, sent before each pass under the node read lock: the
 * core binds the configured quotas to it when it is new or changed (the
 * same shape again costs a comparison). LACHESIS_ECONFIG: a quota does not
 * fit, errbuf names its key; the first time, the caller stops slurmctld,
 * later the quotas keep their previous binding. */
extern int lachesis_cluster(lachesis_cluster_node_t *nodes, int32_t n,
			    char *errbuf, int errlen);
/* Seconds between periodic passes. */
extern int lachesis_pass_interval(void);
/* Ranks all n jobs; out[i] is the decision for jobs[i]. No I/O. Returns
 * LACHESIS_OK, or a positive count of pending jobs that are candidates for
 * the Synergy fallback (then call lachesis_fallback). */
extern int lachesis_pass(int64_t now, lachesis_job_t *jobs, int32_t n,
			 lachesis_prio_t *out);
/* Decides at now (Unix seconds, the caller's clock, as for the pass), from
 * the nodes' state, which fallback candidates of the last pass to shrink;
 * writes up to max of them into out and returns how many. The caller
 * applies them through Slurm's own job update. */
extern int lachesis_fallback(int64_t now, lachesis_node_state_t *nodes,
			     int32_t nn, lachesis_shrink_t *out, int32_t max);
/* Priority of one job between passes (submit, release, requeue). */
extern int lachesis_enqueue(int64_t now, lachesis_job_t *job,
			    lachesis_prio_t *out);
/* Last decision for a job (sprio); LACHESIS_ENOTFOUND if none. */
extern int lachesis_factors(uint32_t job_id, lachesis_prio_t *out);
/* Sizes a job at submit from its model's profile. Memory only. */
extern int lachesis_size_job(lachesis_submit_t *job, lachesis_node_t *nodes,
			     int32_t n, lachesis_sizing_t *out);
/* Starts the sizing goroutine for the n slots (1 to 64) at slots: it waits
 * on ask_fd (an eventfd, non-blocking; the core reads a duplicate of it)
 * and, for each slot in ASKED state, sizes the job as lachesis_size_job
 * does and writes 1 to that slot's done_fd (an eventfd its RPC thread
 * polls). Neither the asking threads nor the goroutine make a cgo call per
 * job, which is what keeps Go's monitor thread asleep between submissions.
 * The slots and their done_fds must outlive the goroutine. LACHESIS_EINVAL
 * if one is already running, or for a bad slot count or done_fd. */
extern int lachesis_sizer_start(lachesis_size_slot_t *slots, int32_t n,
				int ask_fd);
/* Stops the sizing goroutine, waiting up to wait_ms for it to finish the
 * job it may be sizing. 1: stopped (or none ran); 0: still in the core,
 * so the slots and their done_fds must be left alone. */
extern int lachesis_sizer_stop(int wait_ms);
/* Picks a GPU-type preference (--prefer) and a node cap (max_nodes) for a
 * job at submit, from the placement table. Memory only. */
extern int lachesis_place_job(lachesis_place_req_t *job,
			      lachesis_place_node_t *nodes, int32_t n,
			      lachesis_place_t *out);
/* 1 if preemptor may requeue preemptee (both use GPUs and the preemptee
 * sits in a lower queue), else 0. */
extern int lachesis_preemptable(uint32_t preemptor, uint32_t preemptee);
/* Slurm is preempting job_id at now (preempt/tiresias: Slurm asks the
 * victim's grace time once per preemption, just before it requeues or
 * kills it). The core ends the job's run there and counts the preemption
 * at its next pass. Memory only. */
extern void lachesis_preempting(uint32_t job_id, int64_t now);
/* 1 if, as of the last pass and the placements since, some waiting GPU job
 * sits in a better queue than some running GPU job; else 0 (nobody can
 * preempt anybody). Memory only: cheap enough to call for every job. */
extern int lachesis_preemption_possible(void);
/* Where running job job_id comes in the order victims are taken, lowest
 * first (Slurm's PREEMPT_DATA_PRIO): the core's victim order as of its
 * last pass, UINT32_MAX for a job not running then, fallback when the core
 * is not running. Memory only. */
extern uint32_t lachesis_victim_order(uint32_t job_id, uint32_t fallback);

#endif
