// Package synth is a synthetic training job whose speed depends on the CPU
// cores it gets up to a knee, and not beyond it: the workload the profiler's
// tests and the demo profile, so that what the profiler finds can be checked
// against what the workload was built to need.
//
// # Model
//
// Workers loader goroutines each take the next sample, read it from a
// dataset file and spend Spin of CPU time on it ("decoding"), then queue it.
// One "GPU" consumes Batch samples per step and takes a fixed StepCost per
// step without using a CPU (it sleeps). StepCost is Batch × Spin / Knee, so
// Knee cores of loader work exactly saturate the GPU:
//
//	throughput(c cores) = min(c, Workers, Knee) / Spin samples/s
//
// which rises linearly with the cores up to the knee and is flat after it.
//
// # Why CPU time, not a loop count
//
// The work per sample is measured as CPU time consumed by the loader's own
// thread (CLOCK_THREAD_CPUTIME_ID), not as a fixed number of loop
// iterations. A loop count calibrated on one machine would mean a different
// amount of time on another; and spinning on the wall clock would not slow
// down when the thread is descheduled, so the job would not depend on its
// cores at all. With thread CPU time, a loader confined with two others to
// one core really takes three times as long per sample, on any machine.
//
// # Device time
//
// The profiler needs a job that depends on its cores; the sharing tests
// need the opposite. Their introspection compares a job's rate beside a
// neighbour with its rate alone, and a loaded host's CPU contention would
// read as a slowdown (or hide one). With DeviceTime the job's steps follow
// the model in wall time instead (pace.go): each step takes the longer of
// its GPU time (StepCost over the fake GPU's speed beside its neighbours,
// the pair table's) and its batch's input time (min(Workers, Knee) loaders
// at Spin per sample), and its fake GPU's utilisation is the GPU time's
// share of that. No loader runs; the job still keeps its record on the
// fake device, is slowed by its neighbours' records and prints its steps,
// so the node agent and the controller see it as they see any job.
//
// # Output
//
// Every Report interval the job prints one line to its output,
//
//	step 120 12.5 it/s
//
// with the step count so far and the steps per second over the interval,
// which the profiler's default throughput regex reads.
package synth
