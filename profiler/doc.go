// Package profiler measures how a training workload's throughput depends
// on the CPU cores and memory it gets: the offline profile of Synergy
// (OSDI'22) that job_submit/synergy sizes jobs from. The node agent calls
// Profile; its profile.Record travels to the controller.
//
// # The CPU sweep
//
// The workload runs at a series of CPU counts, each for PointDuration,
// with its dataset in the page cache (read once beforehand when it fits in
// half the free memory). The first 30% of each point is start-up and is
// not measured. Counts are whole CPUs per GPU (multiples of the GPU
// count). The search starts at the largest count, halves it while
// throughput stays within Tolerance of the best seen — Synergy's sweep —
// and, where Synergy then steps down one GPU's worth of CPUs at a time,
// bisects between the halving that failed and the last that held: the
// same smallest count within tolerance in O(log n) points instead of O(n)
// (on Synergy's own published profiles, 60 points where its grid has 108,
// with the same best cases). The proportional share's count is measured
// too, since the matrix is normalised to it. On a 2-core node the sweep is
// {2, 1}; on one core it is one point.
//
// A point is measured again, up to three times, keeping the least
// disturbed attempt, when other processes kept its CPUs busy for more than
// a fifth of their time (their busy time in /proc/stat less the
// workload's own CPU time) while the workload's threads queued for a CPU
// (run-queue wait from schedstat, more than a tenth of a thread on
// average): neighbours on a CPU the workload did not want are harmless,
// and a workload with more threads than CPUs queues behind itself. Time
// the host of a virtual machine takes without reporting it as steal cannot
// be seen from inside and is not caught.
//
// # Pinning
//
// A k-CPU point runs on the first k CPUs of this process's affinity,
// one hardware thread per physical core first. Profile uses the strongest
// mechanism the node allows, probing in this order, and logs which:
//
//   - cgroup v2 cpuset: a cgroup per point under this process's own cgroup
//     where that is delegated (the controller enabled for its children),
//     else under the hierarchy's root; the workload is cloned straight into
//     it (clone3 CLONE_INTO_CGROUP);
//   - cgroup v1 cpuset: a cpuset per point under this process's; the
//     workload is forked from a thread moved into it first;
//   - cgroup v2 cpu.max: a quota of k CPUs, with affinity to k CPUs;
//   - sched_setaffinity alone, inherited from the thread that forks the
//     workload. It works everywhere, but a workload may reset its own
//     affinity, which a cgroup does not let it do.
//
// Where it can, the profiler also gives each point's cgroup 16 times the
// default CPU weight (v2 cpu.weight; v1 cpu.shares, in the cpu hierarchy
// next to the cpuset), so that neighbours on the point's CPUs, other login
// sessions included (autogroup, which nice cannot outrank), disturb the
// measurement little, while the profiler itself keeps enough CPU to watch
// a workload that saturates the whole node.
//
// In every case the workload is confined from its first instruction: it
// is forked from an OS thread already confined, not confined after it
// started. Each point's workload runs in its own process group; it gets
// SIGTERM at the end of the point, SIGKILL 2 s later, and a cgroup's
// leftovers are killed before the cgroup is removed. LACHESIS_PROFILE_CPUS
// in its environment says how many CPUs the point has.
//
// # Throughput signal
//
// By default a regular expression over the workload's output (stdout and
// stderr, lines ending at \n or \r so progress bars count) whose first
// capture group is the rate, DefaultRegex matching "12.5 it/s"; a point's
// throughput is the median of its readings. With UseNVML it is the mean GPU
// utilisation of the workload's GPUs (CUDA_VISIBLE_DEVICES, else the first
// GPUs), sampled through go-nvml every 200 ms. A workload that prints no
// matching line, only zero rates, or leaves its GPU idle is an error
// (ErrNoThroughput), never a profile of zeros; without the NVIDIA driver,
// NVML cannot load (ERROR_LIBRARY_NOT_FOUND) and UseNVML fails with
// ErrNoGPUSignal rather than falling back silently. NVML needs cgo; a
// CGO_ENABLED=0 build has no GPU signal.
//
// # Memory model
//
// Memory sensitivity is modelled, as in Synergy, not swept. Profile
// measures the dataset's size, the disk's read bandwidth B (the dataset
// read sequentially with O_DIRECT, or after posix_fadvise(DONTNEED) where
// O_DIRECT is refused; at most 1 GiB or 10 s), the memory bandwidth M (the
// best of three timed 256 MiB copies on one core, which is what reading a
// cached sample costs a loader), and during the sweep how many bytes the
// workload reads per unit of throughput (rchar of its process tree). An
// epoch reads the dataset D once; with C bytes cached it takes
//
//	max(T_cpu, C/M + (D − C)/B),  T_cpu = D / (throughput × bytes per unit)
//
// so throughput at cache C is the swept throughput × T_cpu / epoch time.
// Approximations: sequential reads of large blocks are the disk's best
// case, so a loader reading small files at random sees less and the model
// is optimistic about the disk; fadvise cannot drop pages others hold, so
// on file systems without O_DIRECT the disk may read as faster than it is;
// a workload that reads its data through mmap shows no reads and is
// modelled as insensitive to memory (with a warning).
//
// The dataset is measured as the workload's user (AsUser: a thread with the
// user's fsuid, fsgid and groups), never with the agent's root privileges:
// what the user cannot read is left out, or refused when it is the dataset
// itself. The command is looked up the same way, on the workload's PATH
// (LookPath).
//
// # The sensitivity matrix
//
// Record.Matrix is a sensitivity.Profile per GPU: rows are the swept CPU
// counts divided by the GPUs; columns are memory in GB (GiB, 2^30 bytes,
// Slurm's unit) per GPU at the workload's own peak memory (VmHWM of its
// process tree, at least 1 GB per GPU) plus 0, ¼, ½, ¾ and all of the
// dataset, rounded up to ¼ GB, and the proportional share. Throughput is
// normalised to the GPU-proportional share of the profiling node: its CPUs
// (MaxCPUs) and memory (MemTotal) divided by its GPUs (NodeGPUs); so 1.0 is
// what the job would get under GPU-proportional allocation on a node like
// this one. A CPU-only workload (GPUs 0) counts as one GPU.
//
// Record.Best is Matrix.BestCase(Tolerance): the fewest CPUs, then the
// least memory, within Tolerance of the best throughput. The same
// Tolerance drives the sweep (DefaultTolerance, 10%: see there why not
// sensitivity.DefaultTolerance). When the best case is every CPU the sweep
// could give, Record.MayWantMoreCPUs reports that the model may want more
// than this node has, and the report says "needs ≥ k of k cores".
//
// # Rendering
//
// chart.Render (internal/chart) writes a profile.Record as a text report (for
// `show`), or a chart of throughput against CPUs as SVG or PNG, drawn with
// gonum.org/v1/plot.
package profiler
