package profiler

import (
	"os"
	"strings"
	"time"
)

// nvmlSampleEvery is how often GPU utilisation is sampled. NVML's counter
// is itself an average over the driver's sample period (1/6 s to 1 s
// depending on the GPU), so sampling faster adds nothing.
const nvmlSampleEvery = 200 * time.Millisecond

// visibleDevices is the workload's CUDA_VISIBLE_DEVICES as a list of
// indices or UUIDs, from env (nil: the profiler's own environment); nil
// when unset, meaning the first GPUs of the node.
func visibleDevices(env []string) []string {
	if env == nil {
		env = os.Environ()
	}
	var val string
	found := false
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "CUDA_VISIBLE_DEVICES="); ok {
			val, found = v, true // the last one wins, as in exec
		}
	}
	if !found {
		return nil
	}
	var out []string
	for _, d := range strings.Split(val, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}
