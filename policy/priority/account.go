package priority

// Account is one job's Tiresias accounting: the attained service of its runs
// across requeues, the queue the last pass put it in, and what starvation
// promotion needs (how long the job last ran, since when it waits).
//
// It is the one definition of those rules. slurmctld's core keeps an Account
// per job in its ledger, fed from Slurm's job records every pass; the
// simulator keeps one per simulated job, fed from its own events. Both then
// rank with Ranker and fold the Results back with Apply, so the simulator
// measures exactly what slurmctld runs. Times are Unix seconds (the
// simulator's are seconds since its start); service is GPU-seconds.
type Account struct {
	// ServiceClosed is the service of the runs that have ended.
	ServiceClosed float64
	// ServiceBase is the total service at the last starvation promotion;
	// the queue is chosen by the service since then (QueueService).
	ServiceBase float64
	// RunOpen says a run is in progress; RunStart names it (Slurm's start
	// time in the core: a different start time is a new run, because Slurm
	// resets it on every requeue), RunGPUs and RunSeconds are its GPUs and
	// its length as last observed.
	RunOpen    bool
	RunStart   int64
	RunGPUs    uint32
	RunSeconds float64
	// RunSpeed is the open run's speed (speed.go): its service grows at
	// EffectiveRate(RunGPUs, RunSpeed) per second. 0 = not set, plain
	// GPU-seconds (effective service off, or not known yet).
	RunSpeed float64
	// LastRun is the length of the most recent closed run; Runs counts
	// the runs begun.
	LastRun float64
	Runs    int
	// Preemptions counts the requeues the preemption rule caused
	// (Preempted); the victim order and MaxPerJob count these alone, so
	// a job's owner cannot make it unpreemptable with requeues of their
	// own.
	Preemptions int
	// WaitingSince is when the job last became pending (submission, the end
	// of a run, or a promotion): starvation is measured from it.
	WaitingSince int64
	// Queue and QueueEntry are what the last pass decided.
	Queue      int
	QueueEntry int64
	Promotions int
	// Upgraded is when the job, submitted opportunistic, was upgraded to
	// guaranteed for good after waiting (opportunistic.go); 0: never.
	Upgraded int64
}

// NewAccount is the account of a job submitted at submit: queue 0, entered
// and waiting since then.
func NewAccount(submit int64) Account {
	return Account{QueueEntry: submit, WaitingSince: submit}
}

// ServiceAt is the attained service with the open run counted as runSeconds
// long. The simulator asks it at any instant; the core's Total is
// ServiceAt(RunSeconds).
func (a *Account) ServiceAt(runSeconds float64) float64 {
	t := a.ServiceClosed
	if a.RunOpen {
		t += EffectiveRate(a.RunGPUs, a.RunSpeed) * runSeconds
	}
	return t
}

// Total is the attained service across all runs so far.
func (a *Account) Total() float64 { return a.ServiceAt(a.RunSeconds) }

// QueueService is the service that places the job in a queue: everything
// since its last promotion.
func (a *Account) QueueService() float64 { return a.Total() - a.ServiceBase }

// StartRun opens a run named start on gpus GPUs, closing any run still
// open (a run that ended unseen between two observations).
func (a *Account) StartRun(start int64, gpus uint32) {
	a.CloseRun()
	a.RunOpen, a.RunStart, a.RunGPUs, a.RunSeconds, a.RunSpeed = true, start, gpus, 0, 0
	a.Runs++
}

// ObserveRun records that the run named start, on gpus GPUs, has lasted
// seconds. A start that differs from the open run's is a new run: Slurm
// requeued and restarted the job between two observations.
func (a *Account) ObserveRun(start int64, gpus uint32, seconds float64) {
	if !a.RunOpen || a.RunStart != start {
		a.StartRun(start, gpus)
	}
	a.RunSeconds = seconds
}

// CloseRun moves the open run's service into the closed total.
func (a *Account) CloseRun() {
	if !a.RunOpen {
		return
	}
	a.ServiceClosed += EffectiveRate(a.RunGPUs, a.RunSpeed) * a.RunSeconds
	a.LastRun = a.RunSeconds
	a.RunOpen, a.RunStart, a.RunGPUs, a.RunSeconds, a.RunSpeed = false, 0, 0, 0, 0
}

// SetRunSpeed fixes the open run's speed (RunSpeed), which then weights
// the whole run: a run keeps its GPUs, so their type, from start to end.
// It does nothing without an open run.
func (a *Account) SetRunSpeed(speed float64) {
	if a.RunOpen {
		a.RunSpeed = speed
	}
}

// RunEnd is when the open run ended if it ended now: its start plus its
// length as last observed. The core uses it when a pass finds a job pending
// again, because the requeue itself happened between passes.
func (a *Account) RunEnd() int64 { return a.RunStart + int64(a.RunSeconds) }

// Requeued closes the open run of a job that is pending again and starts
// its wait at end; a job with no open run is left as it is.
func (a *Account) Requeued(end int64) {
	if !a.RunOpen {
		return
	}
	a.WaitingSince = end
	a.CloseRun()
}

// Preempted is Requeued for a requeue the preemption rule caused: it also
// counts the preemption.
func (a *Account) Preempted(end int64) {
	if !a.RunOpen {
		return
	}
	a.Preemptions++
	a.Requeued(end)
}

// Apply folds a pass's Result into the account. A promotion resets the
// queue service (the job counts from zero again, as the paper's δ rule
// says) and restarts its wait, so it cannot be promoted again before it
// has waited once more. An upgrade (Result.Upgraded) is kept for good
// in Upgraded. It reports whether the job was promoted and whether its
// queue changed.
func (a *Account) Apply(now int64, r Result) (promoted, queueChanged bool) {
	if r.Promoted {
		a.ServiceBase = a.Total()
		a.Promotions++
		a.WaitingSince = now
	}
	if r.Upgraded && a.Upgraded == 0 {
		a.Upgraded = now
	}
	queueChanged = r.Queue != a.Queue
	a.Queue, a.QueueEntry = r.Queue, r.QueueEntry
	return r.Promoted, queueChanged
}

// Describe fills the fields of a pass's Job that come from the account;
// the caller fills identity, state, GPUs, times and Slurm's own factors.
func (a *Account) Describe(j *Job) {
	j.Service = a.QueueService()
	j.Queue, j.QueueEntry = a.Queue, a.QueueEntry
	j.LastRun, j.WaitingSince = a.LastRun, a.WaitingSince
	j.Ran = a.Runs > 0
}

// Opportunistic says whether a job of an opportunistic class still is one:
// it was not upgraded. The caller says whether the job was submitted to
// the class.
func (a *Account) Opportunistic(submitted bool) bool { return submitted && a.Upgraded == 0 }

// The Gittins distribution is learned from the cluster's own completions:
// the bundled seed until LearnMinHistory jobs have finished, then the most
// recent LearnWindow of them, so it follows a workload that changes.
const (
	LearnMinHistory = 100
	LearnWindow     = 10000
)
