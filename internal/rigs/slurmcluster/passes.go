package slurmcluster

import (
	"regexp"
	"strconv"
	"time"
)

// passLine is the line priority/tiresias logs (at SlurmctldDebug=verbose)
// after each pass: jobs ranked, priorities and service markers changed, and
// the time the pass held slurmctld's job write lock (Slurm's TIME_STR,
// "usec=N"). TestPassLineMatchesThePluginsFormat renders the format string
// of slurmctld-hook/priority_tiresias.c and fails if this stops matching.
var passLine = regexp.MustCompile(`priority/tiresias: pass ranked \d+ jobs(?: \(and recorded \d+ that finished\))?, changed \d+ priorities and \d+ service markers in usec=(\d+)`)

// PassTimes returns the duration of every Lachesis pass logged in log (a
// slice of slurmctld's log), in order.
func PassTimes(log string) []time.Duration {
	var out []time.Duration
	for _, m := range passLine.FindAllStringSubmatch(log, -1) {
		us, _ := strconv.ParseInt(m[1], 10, 64)
		out = append(out, time.Duration(us)*time.Microsecond)
	}
	return out
}
