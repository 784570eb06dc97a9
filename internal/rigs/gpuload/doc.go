// Package gpuload is lachesis-gpuload: a GPU load that needs only the
// NVIDIA driver, for the GPU check (docs/gpu-check.md) that holds the node
// agent's per-process NVML figures against nvidia-smi's.
//
// It reaches the CUDA driver API through dlopen of libcuda.so.1 at run
// time, declaring the few prototypes it calls itself, so it builds without
// CUDA headers or libraries and runs where only the driver is installed. Its
// kernel (spin.ptx) is PTX written by hand and embedded in the binary; the
// driver compiles it for the GPU when the module is loaded.
//
// The load is a duty cycle: in every period (100 ms by default) the GPU
// runs spin kernels for the chosen share of it and is left idle for the
// rest. A kernel's length is calibrated at start (its iterations per
// nanosecond, the fastest of several launches after the clocks have
// ramped up), so the share is GPU work, not wall time: when another
// process's kernels delay ours, the period runs long rather than doing less.
// The memory is allocated once and written, so the driver has committed it.
package gpuload
