package profiler

// Log attribute keys, constant so the agent's logs can be searched by them.
const (
	logKeyModel      = "model"
	logKeyMechanism  = "mechanism"
	logKeySignal     = "signal"
	logKeyCPUs       = "cpus"
	logKeyThroughput = "throughput"
	logKeyContention = "contention"
	logKeyWaiting    = "waiting_threads"
	logKeyAttempt    = "attempt"
	logKeyBytes      = "bytes"
	logKeyRate       = "bytes_per_s"
	logKeyMode       = "mode"
	logKeyBest       = "best_cpus_per_gpu"
	logKeyBestMem    = "best_mem_gb_per_gpu"
	logKeyErr        = "err"
	logKeyCount      = "count"
)
