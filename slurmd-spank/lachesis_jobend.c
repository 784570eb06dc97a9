/*
 * lachesis_jobend: a SPANK plugin that tells the node's Lachesis agent when
 * a batch job's script ended.
 *
 * Why: Slurm 22.05's completion messages (complete_batch_script_msg_t,
 * step_complete_msg_t) carry no end time; slurmctld stamps end_time when it
 * receives them. While slurmctld is down, slurmstepd keeps retrying, so a
 * job that ended during an outage "ends" at the restart and its GPU time is
 * over-charged. The node's Epilog does not help: slurmd runs it only when
 * slurmctld sends REQUEST_TERMINATE_JOB, i.e. after the restart too. What
 * does run on the node at the real end, as root, controller or not, is
 * slurmstepd's SPANK task_exit callback: this plugin uses it.
 *
 * It sends one line, {"op":"job_end","job_end":{"job_id":N,"end":T}}, to
 * the agent's unix socket and waits for its answer (the agent has spooled
 * the report). It never fails the step and gives up after TIMEOUT_S
 * seconds each way: the cost of a missing report is only Slurm's end time.
 *
 * It also tells every step where that socket is: LACHESIS_PROGRESS=PATH in
 * the step's environment, where a training loop that opts in reports its
 * iterations (etc/lachesis_progress.py; docs/profiling.md). Setting the
 * variable costs nothing and trusts nothing: the agent derives the job of
 * a report from the reporting process, never from what it says.
 *
 * plugstack.conf:  optional /usr/lib/.../lachesis_jobend.so [socket=PATH]
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

SPANK_PLUGIN(lachesis_jobend, 1);

#define DEFAULT_SOCKET "/run/lachesis/agent.sock"
#define TIMEOUT_S 2
#define PROGRESS_ENV "LACHESIS_PROGRESS"

static const char *socket_arg(int ac, char **av)
{
	for (int i = 0; i < ac; i++)
		if (strncmp(av[i], "socket=", 7) == 0 && av[i][7] != '\0')
			return av[i] + 7;
	return DEFAULT_SOCKET;
}

static int report(const char *path, uint32_t job, long long end)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = TIMEOUT_S };
	char buf[512];
	int fd, n, len;

	if (strlen(path) >= sizeof(addr.sun_path))
		return -1;
	strcpy(addr.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
		goto fail;
	len = snprintf(buf, sizeof(buf),
		       "{\"op\":\"job_end\",\"job_end\":{\"job_id\":%u,\"end\":%lld}}\n",
		       job, end);
	if (write(fd, buf, len) != len)
		goto fail;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		goto fail;
	buf[n] = '\0';
	close(fd);
	/* The agent's answer echoes the report; anything else is an error. */
	return strstr(buf, "\"job_end\"") ? 0 : -1;
fail:
	close(fd);
	return -1;
}

/* user_init runs once per step in slurmstepd, before its tasks start, so
 * the variable reaches every task (and the batch script, whose srun steps
 * get it again from their own slurmstepd). Overwritten: a value the user
 * brought from elsewhere names another node's or site's socket. */
int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	if (spank_context() != S_CTX_REMOTE)
		return ESPANK_SUCCESS;
	if (spank_setenv(sp, PROGRESS_ENV, socket_arg(ac, av), 1) != ESPANK_SUCCESS)
		slurm_info("lachesis_jobend: could not set %s in the step's environment", PROGRESS_ENV);
	return ESPANK_SUCCESS;
}

int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
	uint32_t job = 0, step = 0;
	long long end = (long long)time(NULL);
	const char *path;

	if (spank_context() != S_CTX_REMOTE)
		return ESPANK_SUCCESS;
	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS)
		return ESPANK_SUCCESS;
	/* The batch script's end is the job's end; its other steps end
	 * earlier and are not what Slurm charges. */
	if (step != SLURM_BATCH_SCRIPT || job == 0)
		return ESPANK_SUCCESS;
	path = socket_arg(ac, av);
	if (report(path, job, end) != 0)
		slurm_info("lachesis_jobend: job %u: could not tell the node agent at %s (%m); its GPU time keeps Slurm's end",
			   job, path);
	return ESPANK_SUCCESS;
}
