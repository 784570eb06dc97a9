package priority

import "cmp"

// sortKey is the part of a job the total order looks at, packed together so
// that sorting a large pass moves small values and stays cache-friendly.
type sortKey struct {
	queue    int32
	deferred bool    // the job cannot start yet (Job.Deferred)
	over     bool    // the job's account is over its fair share (fairshare.go)
	pair     float64 // a waiting opportunistic job's pair score (0 for every other job)
	id       uint32
	index    float64 // Gittins index; 0 for every job in LAS mode
	entry    int64   // queue-entry time
	submit   int64
	jobSlot  int32 // the job's position in the input
}

// compareKeys is the policy's total order. Each step exists for a reason:
//
//  1. queue ascending: the discretized queues are the core of Tiresias;
//     1a. jobs that can start before jobs that cannot yet (Job.Deferred:
//     a dependency, a begin time ahead), which stand last in their queue
//     as a job just submitted does (Standing): a job let go between
//     passes, by the end of the job it waits for, must not overtake its
//     queue with a place it held while it could not run (a copy chained
//     behind its original, which the next pass finds an heir of it:
//     inherit.go);
//     1b. fair share: jobs of accounts at or under their share before jobs
//     of accounts over it (always false when fair share is off), so one
//     account's backlog cannot hold a queue against the others;
//     1c. pair score descending: of waiting opportunistic jobs, the one
//     the pair table predicts to slow its guaranteed neighbour least
//     goes first, so the job Slurm places beside a guaranteed one is the
//     one sharing.Config.Choose would pick (every other job has 0, so
//     this step decides nothing for them; promote_after bounds how long
//     a poorly paired job can wait behind better ones);
//  2. Gittins index descending: the job likeliest to finish soon per unit
//     of service goes first (in LAS mode every index is 0, so this step
//     never decides);
//  3. queue-entry time ascending: FIFO inside a queue, which is 2D-LAS;
//  4. submit time ascending: of jobs that entered together, the older one;
//  5. job id ascending: unique in Slurm, so the order is total;
//  6. input position: only matters if a caller passes duplicate ids, and
//     keeps the order a function of the input even then.
func compareKeys(a, b sortKey) int {
	if c := cmp.Compare(a.queue, b.queue); c != 0 {
		return c
	}
	if a.deferred != b.deferred {
		if b.deferred {
			return -1
		}
		return 1
	}
	if a.over != b.over {
		if b.over {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(b.pair, a.pair); c != 0 {
		return c
	}
	if c := cmp.Compare(b.index, a.index); c != 0 {
		return c
	}
	if c := cmp.Compare(a.entry, b.entry); c != 0 {
		return c
	}
	if c := cmp.Compare(a.submit, b.submit); c != 0 {
		return c
	}
	if c := cmp.Compare(a.id, b.id); c != 0 {
		return c
	}
	return cmp.Compare(a.jobSlot, b.jobSlot)
}
