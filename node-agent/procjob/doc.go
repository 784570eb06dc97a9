// Package procjob finds a process's Slurm job on this node, from the
// kernel's view of it, which the process cannot forge; it is the one
// reader of what /proc says of a process (status, stat, cgroup, the
// ancestry up to Slurm's step daemon) for the node agent and the
// profiler.
//
// Each question reads /proc once: Read takes one look at the process
// (its status, once, serves both its uid and the first step of its
// ancestry; its cgroups, and the owners of their job_<id> directories)
// and returns the facts; the rule that turns facts into a job lives in
// rule.go alone (root's job cgroup first, the step ancestry where there
// is none). Every read is bounded (readBounded), and a process that ends
// while it is read, or whose pid is reused meanwhile (its start time
// changed), is "gone", never another process's job.
package procjob
