package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/lachesis-sched/lachesis/node-agent/config"
	"github.com/lachesis-sched/lachesis/node-agent/localapi"
)

// Slurm 22.05 sets a job's end time when slurmctld receives the node's
// completion message, so a job that ends while slurmctld is down is charged
// until the restart. slurmd runs the Epilog on each node when the job ends,
// controller or not; as the Epilog (Epilog=/usr/bin/lachesis-node-agent, or
// `lachesis-node-agent -job-end` from a site's own epilog script) this
// command tells the local agent "job $SLURM_JOB_ID ended now". The agent
// spools it and delivers it to the controller, which lowers the job's
// charged GPU time to the true end.
//
// An Epilog that fails drains the node, and one that hangs holds the job in
// COMPLETING: so this never fails (exit 0, a line on stderr at most) and
// gives up after jobEndTimeout.

// jobEndTimeout bounds the whole report; the agent answers once the report
// is in its spool, which takes milliseconds.
const jobEndTimeout = 5 * time.Second

// inEpilog: slurmd runs the Epilog with no arguments and says so in
// SLURM_SCRIPT_CONTEXT.
func inEpilog(args []string) bool {
	return len(args) == 0 && os.Getenv("SLURM_SCRIPT_CONTEXT") == "epilog_slurmd"
}

// reportJobEnd does the Epilog's work; it only ever prints.
func reportJobEnd(configPath string) {
	end := time.Now().Unix()
	id, err := strconv.ParseUint(os.Getenv("SLURM_JOB_ID"), 10, 32)
	if err != nil || id == 0 {
		fmt.Fprintln(os.Stderr, "lachesis-node-agent -job-end: no SLURM_JOB_ID; nothing reported")
		return
	}
	socket := config.Default().Socket
	if cfg, err := config.Load(configPath); err == nil {
		socket = cfg.Socket
	}
	ctx, cancel := context.WithTimeout(context.Background(), jobEndTimeout)
	defer cancel()
	if err := localapi.ReportJobEnd(ctx, socket, uint32(id), end); err != nil {
		fmt.Fprintf(os.Stderr, "lachesis-node-agent -job-end: job %d: %v (its GPU time keeps Slurm's end)\n", id, err)
	}
}
