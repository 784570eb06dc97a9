package profile

import (
	"bufio"
	"fmt"
	"io"
	"time"
)

// WriteText writes the record as a report a person reads in a terminal.
func WriteText(out io.Writer, r Record) error {
	w := bufio.NewWriter(out)
	fmt.Fprintf(w, "profile %s  (id %s)\n", r.Model, r.ID)
	fmt.Fprintf(w, "node %s, user %s, %d GPU(s), signal %s, %s, took %s\n",
		r.Node, r.User, r.GPUs, r.Signal, r.Started.Format(time.RFC3339),
		r.Finished.Sub(r.Started).Round(100*time.Millisecond))

	best := 0.0
	for _, m := range r.CPUSweep {
		best = max(best, m.Throughput)
	}
	unit := ThroughputUnit(r.Signal)
	fmt.Fprintf(w, "\nCPU sweep (dataset in memory):\n  %5s  %12s  %7s  %8s  %7s\n", "CPUs", unit, "of best", "readings", "seconds")
	for _, m := range r.CPUSweep {
		fmt.Fprintf(w, "  %5d  %12.4g  %6.0f%%  %8d  %7.1f\n", m.CPUs, m.Throughput, 100*m.Throughput/best, m.Samples, m.Seconds)
	}

	fmt.Fprintf(w, "\nbest case: %s and %.2f GB per GPU (%s for the workload), within %.0f%% of the best throughput\n",
		NCPUs(r.Best.CPUsPerGPU), r.Best.MemGBPerGPU, NCPUs(r.BestCPUs()), 100*r.Tolerance)
	if r.MayWantMoreCPUs() {
		fmt.Fprintf(w, "needs ≥ %d of %d cores: throughput was still rising at the node's limit; the model may want more CPUs than this node has\n",
			r.BestCPUs(), r.MaxSweptCPUs())
	}
	if r.DatasetBytes > 0 {
		fmt.Fprintf(w, "memory model: dataset %s, disk %s/s, memory %s/s\n",
			byteSize(float64(r.DatasetBytes)), byteSize(r.DiskBW), byteSize(r.MemBW))
	} else {
		fmt.Fprintln(w, "memory model: no dataset; insensitive to memory")
	}

	p := r.Matrix
	fmt.Fprintf(w, "\nsensitivity matrix, per GPU (1.00 = the node's proportional share):\n  %8s", "CPUs\\GB")
	for _, m := range p.MemGB {
		fmt.Fprintf(w, " %7.2f", m)
	}
	fmt.Fprintln(w)
	for i, c := range p.CPUs {
		fmt.Fprintf(w, "  %8d", c)
		for j := range p.MemGB {
			mark := " "
			if c == r.Best.CPUsPerGPU && p.MemGB[j] == r.Best.MemGBPerGPU {
				mark = "*"
			}
			fmt.Fprintf(w, " %6.2f%s", p.Throughput[i][j], mark)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "  (* best case)")
	return w.Flush()
}

// ThroughputUnit names the unit of a signal's readings.
func ThroughputUnit(signal string) string {
	if signal == "nvml" {
		return "GPU util %"
	}
	return "throughput"
}

// byteSize formats bytes with a binary prefix.
func byteSize(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	return fmt.Sprintf("%.3g %s", b, units[i])
}

// NCPUs is "1 CPU" or "n CPUs".
func NCPUs(n int) string {
	if n == 1 {
		return "1 CPU"
	}
	return fmt.Sprintf("%d CPUs", n)
}
