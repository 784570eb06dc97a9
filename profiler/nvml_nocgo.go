//go:build !cgo

package profiler

import "fmt"

// openGPUSignal: go-nvml needs cgo to load the driver's library, so a
// build without cgo has no GPU signal.
func openGPUSignal(normalised) (Signal, func(), error) {
	return nil, nil, fmt.Errorf("%w: built without cgo, NVML cannot be loaded", ErrNoGPUSignal)
}
