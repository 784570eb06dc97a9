package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/lachesis-sched/lachesis/sim"
	"github.com/lachesis-sched/lachesis/sim/report"
)

// heteroOptions are the flags of heterogeneous-cluster runs.
type heteroOptions struct {
	types, table, reference, policies, consolidate string
	sensitiveBelow                                 float64
}

func (h *heteroOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&h.types, "hetero", "", "heterogeneous cluster: GPU types of the Gavel table in equal node groups, e.g. k80,p100,v100 (empty: homogeneous)")
	fs.StringVar(&h.table, "gavel", "data/gavel/throughputs.csv", "with -hetero: Gavel's throughput table")
	fs.StringVar(&h.reference, "hetero-ref", "p100", "with -hetero: the GPU type the trace's durations were measured on")
	fs.StringVar(&h.policies, "hetero-policies", "agnostic,effective", "with -hetero: placement/service policies, agnostic and/or effective")
	fs.StringVar(&h.consolidate, "consolidate", "on,off", "with -hetero: consolidation of placement-sensitive jobs, on and/or off")
	fs.Float64Var(&h.sensitiveBelow, "sensitive-below", sim.DefaultSensitiveBelow, "with -hetero: a job is placement-sensitive on a type when spread/consolidated throughput is below this")
}

// variants crosses every base variant with the heterogeneous policies and
// consolidation settings; without -hetero it returns base unchanged.
func (h *heteroOptions) variants(base []sim.Variant) ([]sim.Variant, error) {
	if h.types == "" {
		return base, nil
	}
	f, err := os.Open(h.table)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	table, err := sim.ReadGavelCSV(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", h.table, err)
	}
	var cons []bool
	for _, c := range splitList(h.consolidate) {
		switch c {
		case "on":
			cons = append(cons, true)
		case "off":
			cons = append(cons, false)
		default:
			return nil, fmt.Errorf("-consolidate: %q is not on or off", c)
		}
	}
	var policies []sim.HeteroPolicy
	for _, p := range splitList(h.policies) {
		policies = append(policies, sim.HeteroPolicy(p))
	}
	proto := sim.HeteroConfig{Table: table, Types: splitList(h.types), Reference: h.reference, SensitiveBelow: h.sensitiveBelow}
	return sim.HeteroVariants(base, proto, policies, cons), nil
}

// writeHetero prints the heterogeneous table and writes it to -out.
func writeHetero(o *options, results []*sim.Result) error {
	if o.hetero.types == "" {
		return nil
	}
	fmt.Println()
	if err := report.WriteHeteroMarkdown(os.Stdout, results); err != nil {
		return err
	}
	if o.out == "" {
		return nil
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	path, err := report.WriteHeteroOutputs(o.out, results)
	if err == nil {
		fmt.Println("wrote", path)
	}
	return err
}
