package profile

import (
	"time"

	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// Measurement is one point of a CPU sweep: the workload pinned to CPUs
// cores, with its whole dataset in memory.
type Measurement struct {
	CPUs       int     `codec:"cpus"`
	Throughput float64 `codec:"tput"`    // samples (or iterations) per second
	Samples    int     `codec:"samples"` // throughput readings averaged
	Seconds    float64 `codec:"secs"`    // how long the point ran
}

// Record is one profiling run of one model: what a node agent measures,
// keeps in its spool, delivers to the controller, and what the controller
// stores and job_submit/synergy sizes jobs from. It travels as msgpack;
// the codec tags are the wire names and must not change meaning.
type Record struct {
	// ID makes delivery idempotent: the controller stores a record once
	// however often an agent retries it.
	ID    string `codec:"id"`
	Model string `codec:"model"`
	Node  string `codec:"node"`
	User  string `codec:"user"`
	// UID is the user's uid, the profile's owner: it sizes the jobs of
	// that user only, unless an admin publishes it for everyone (wire
	// version 3; the agent sets it from the caller's SO_PEERCRED).
	UID  uint32 `codec:"uid"`
	GPUs int    `codec:"gpus"` // GPUs the workload used while profiled
	// GPUType is the type of those GPUs as Slurm names it in the node's
	// typed GRES (e.g. "a100" for Gres=gpu:a100:4), or NVML's device name
	// where the node has no typed GRES. "" = untyped: records of agents
	// older than this field decode with "", and such a profile says
	// nothing about speeds between types.
	GPUType  string    `codec:"gpu_type,omitempty"`
	Started  time.Time `codec:"started"`
	Finished time.Time `codec:"finished"`
	// Signal says where throughput came from: "regex" or "nvml".
	Signal   string        `codec:"signal"`
	CPUSweep []Measurement `codec:"sweep"`
	// The memory model's inputs (bytes, bytes per second).
	DatasetBytes int64   `codec:"dataset_bytes"`
	DiskBW       float64 `codec:"disk_bw"`
	MemBW        float64 `codec:"mem_bw"`
	// Matrix is the sensitivity matrix, per GPU: CPUs × memory (GB), with
	// throughput normalised to the GPU-proportional share of the profiling
	// node (1.0).
	Matrix    sensitivity.Profile `codec:"matrix"`
	Best      sensitivity.Demand  `codec:"best"`
	Tolerance float64             `codec:"tolerance"`
}
