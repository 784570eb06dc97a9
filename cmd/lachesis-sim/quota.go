package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lachesis-sched/lachesis/policy/cells"
	"github.com/lachesis-sched/lachesis/policy/quota"
	"github.com/lachesis-sched/lachesis/sim/quotasim"
	"github.com/lachesis-sched/lachesis/sim/trace"
)

// runQuota is `lachesis-sim quota`: sharing safety of guaranteed quotas
// in cells (issue 35; sim/quotasim): each policy on the shared cluster,
// each account alone on its quota's cells.
func runQuota(args []string) error {
	fs := flag.NewFlagSet("lachesis-sim quota", flag.ContinueOnError)
	path := fs.String("trace", "", "trace file (Philly CSV, job list, ...); a job's account is its virtual cluster")
	from := fs.String("from", "", "first submission to keep (date or seconds)")
	to := fs.String("to", "", "last submission to keep (date or seconds)")
	nodes := fs.Int("nodes", 64, "nodes")
	gpus := fs.Int("gpus-per-node", 8, "GPUs per node (buddy cells of halves)")
	switchNodes := fs.Int("switch-nodes", 8, "nodes under one leaf switch (0: one switch)")
	quotas := fs.String("quotas", "demand", `"demand" (each account's share of the trace's GPU time, in cells) or account=QUOTA;... e.g. "a=2 nodes of 8 GPUs;b=16 GPUs in cells of 4"`)
	policies := fs.String("policies", "defaults,fairshare,quota,quota-cells", "policies, comma-separated")
	pass := fs.Float64("pass-interval", 60, "seconds between scheduling passes")
	bound := fs.Int("max-reclaim-per-pass", quota.DefaultMaxReclaimPerPass, "jobs one pass's reclaims may evict")
	ckpt := fs.Float64("checkpoint-every", 1800, "seconds between an evicted job's checkpoints (0: none)")
	parallel := fs.Int("parallel", 2, "simulations at once")
	out := fs.String("out", "", "directory for report.md (optional)")
	title := fs.String("title", "", "report title")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" {
		return fmt.Errorf("-trace is required")
	}
	tr, err := trace.Load(*path, trace.FormatAuto)
	if err != nil {
		return err
	}
	var f trace.Filter
	if f.From, f.FromSec, err = parseWhen(*from); err != nil {
		return fmt.Errorf("-from: %w", err)
	}
	if f.To, f.ToSec, err = parseWhen(*to); err != nil {
		return fmt.Errorf("-to: %w", err)
	}
	if tr, err = tr.Select(f); err != nil {
		return err
	}
	top := cells.Uniform(*nodes, *gpus, *switchNodes)
	tree, err := cells.New(top)
	if err != nil {
		return err
	}
	cfg := quotasim.DefaultConfig(top)
	cfg.PassInterval, cfg.MaxReclaimPerPass, cfg.CheckpointEvery = *pass, *bound, *ckpt
	if *quotas == "demand" {
		cfg.Quotas = quotasim.QuotasFromDemand(tr, tree)
	} else {
		cfg.Quotas = map[string]quota.Spec{}
		for _, kv := range strings.Split(*quotas, ";") {
			a, q, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("-quotas: %q is not account=QUOTA", kv)
			}
			spec, err := quota.Parse(q)
			if err != nil {
				return fmt.Errorf("-quotas: %s: %w", a, err)
			}
			cfg.Quotas[strings.TrimSpace(a)] = spec
		}
	}
	var ps []quotasim.Policy
	for _, p := range splitList(*policies) {
		ps = append(ps, quotasim.Policy(p))
	}
	var b strings.Builder
	if *title != "" {
		fmt.Fprintf(&b, "## %s\n\n", *title)
	}
	fmt.Fprintf(&b, "trace %s: %d jobs, %.0f GPU-hours; cluster %d nodes × %d GPUs, %d nodes a switch; pass %g s, reclaim bound %d, checkpoints every %g s\n\nQuotas:", tr.Name, len(tr.Jobs), tr.GPUSeconds()/3600, *nodes, *gpus, *switchNodes, *pass, *bound, *ckpt)
	total := 0
	for _, a := range slices.Sorted(maps.Keys(cfg.Quotas)) {
		fmt.Fprintf(&b, " %s %s;", a, cfg.Quotas[a])
		total += cfg.Quotas[a].GPUs()
	}
	fmt.Fprintf(&b, " %d of %d GPUs in all\n\n", total, tree.GPUs())
	start := time.Now()
	rep, err := quotasim.Compare(tr, cfg, ps, *parallel)
	if err != nil {
		return err
	}
	rep.Write(&b)
	fmt.Fprintf(os.Stderr, "quota: %d shared runs and %d private ones in %s\n", len(ps), len(cfg.Quotas), time.Since(start).Round(time.Second))
	fmt.Print(b.String())
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(*out, "report.md"), []byte(b.String()), 0o644)
	}
	return nil
}
