// Package telemetry samples a node's NVIDIA GPUs through NVML
// (github.com/NVIDIA/go-nvml) for the node agent's telemetry reports.
//
// NVML is reached through nvml.Interface, so tests run on the mock from
// go-nvml's pkg/nvml/mock. On a node without an NVIDIA driver, NVML's
// library is missing: Open then logs "no NVIDIA driver: GPU telemetry off"
// once and returns a source that reports ErrNoDriver, and the agent carries
// on without telemetry. A value NVML does not support on a GPU (power on
// some boards) is reported as 0 rather than failing the sample.
package telemetry
