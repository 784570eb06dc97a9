package quotasim

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/lachesis-sched/lachesis/policy/cells"
	"github.com/lachesis-sched/lachesis/policy/quota"
	"github.com/lachesis-sched/lachesis/sim/trace"
)

// QuotasFromDemand gives each account a quota from its share of the
// trace's GPU time, in cells: its share of the cluster's GPUs, rounded
// down to whole cells of the largest cell size (at most a node) that it
// fills; an account whose share is under one GPU gets none. The quotas
// then fit the cluster together.
func QuotasFromDemand(tr *trace.Trace, tree *cells.Tree) map[string]quota.Spec {
	demand := map[string]float64{}
	total := 0.0
	for _, j := range tr.Jobs {
		demand[j.Cluster] += float64(j.GPUs) * j.Duration
		total += float64(j.GPUs) * j.Duration
	}
	out := map[string]quota.Spec{}
	sizes := tree.Sizes()
	for a, d := range demand {
		gpus := int(d / total * float64(tree.GPUs()))
		size := 0
		for _, s := range sizes {
			if s <= gpus && s <= tree.NodeGPUs() {
				size = s
			}
		}
		if size == 0 {
			continue
		}
		out[a] = quota.Spec{Cells: gpus / size, CellGPUs: size}
	}
	return out
}

// PrivateTopology is a cluster of exactly a quota's cells: cells of a
// node or more as whole nodes (a multi-node cell under one switch),
// smaller cells as nodes of that many GPUs; a quota of nodes ("N nodes
// of G GPUs") as its nodes under one switch.
func PrivateTopology(s quota.Spec, nodeGPUs int) cells.Topology {
	if s.Nodes {
		return cells.Uniform(s.Cells, s.CellGPUs, s.Cells)
	}
	if s.CellGPUs >= nodeGPUs && s.CellGPUs%nodeGPUs == 0 {
		per := s.CellGPUs / nodeGPUs
		return cells.Uniform(s.Cells*per, nodeGPUs, per)
	}
	return cells.Uniform(s.Cells, s.CellGPUs, 1)
}

// AccountRow is one account under one policy against its private cluster.
type AccountRow struct {
	Account string
	Quota   quota.Spec
	// Jobs counted (those its private cluster can run); TooBig those it
	// cannot, left out of both sides.
	Jobs, TooBig           int
	SharedQueue, SharedJCT float64
	AloneQueue, AloneJCT   float64
	// MultiQueue: the average queueing delay of its multi-GPU jobs, shared.
	MultiQueue float64
}

// WorseQueue / WorseJCT: shared worse than alone, beyond 1% (and 1 s).
func (a AccountRow) WorseQueue() bool {
	return a.SharedQueue > a.AloneQueue*1.01+1
}
func (a AccountRow) WorseJCT() bool { return a.SharedJCT > a.AloneJCT*1.01+1 }

// PolicyReport is one policy's shared run held against the private runs.
type PolicyReport struct {
	Result
	Rows []AccountRow
	// All jobs' averages, and the multi-GPU jobs' queueing delay.
	AvgQueue, AvgJCT, MultiQueue float64
	WorseQueue, WorseJCT         int
}

// Report is the whole comparison.
type Report struct {
	Quotas   map[string]quota.Spec
	Policies []PolicyReport
}

// Compare runs each policy on the shared cluster and each account with a
// quota alone on its private cluster, parallel runs at a time.
func Compare(tr *trace.Trace, base Config, policies []Policy, parallel int) (Report, error) {
	rep := Report{Quotas: base.Quotas}
	accounts := slices.Sorted(maps.Keys(base.Quotas))
	tree, err := cells.New(base.Topology)
	if err != nil {
		return rep, err
	}
	type task struct {
		policy  Policy
		account string
	}
	var tasks []task
	for _, p := range policies {
		tasks = append(tasks, task{policy: p})
	}
	for _, a := range accounts {
		tasks = append(tasks, task{account: a})
	}
	results := make([]Result, len(tasks))
	errs := make([]error, len(tasks))
	sem := make(chan struct{}, max(1, parallel))
	var wg sync.WaitGroup
	for i, t := range tasks {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cfg := base
			if t.account == "" {
				cfg.Policy = t.policy
				results[i], errs[i] = Run(tr, cfg)
				return
			}
			spec := base.Quotas[t.account]
			cfg.Policy = QuotaCells
			cfg.Topology = PrivateTopology(spec, tree.NodeGPUs())
			cfg.Quotas = map[string]quota.Spec{t.account: spec}
			mine := &trace.Trace{Name: tr.Name, Start: tr.Start}
			for _, j := range tr.Jobs {
				if j.Cluster == t.account {
					mine.Jobs = append(mine.Jobs, j)
				}
			}
			if len(mine.Jobs) == 0 {
				return
			}
			results[i], errs[i] = Run(mine, cfg)
		}()
	}
	wg.Wait()
	for i, e := range errs {
		if e != nil {
			return rep, fmt.Errorf("%v %s: %w", tasks[i].policy, tasks[i].account, e)
		}
	}
	alone := map[string]map[uint32]JobResult{}
	for i, t := range tasks {
		if t.account != "" {
			m := map[uint32]JobResult{}
			for _, j := range results[i].Jobs {
				m[j.ID] = j
			}
			alone[t.account] = m
		}
	}
	for i, t := range tasks {
		if t.account != "" {
			continue
		}
		pr := PolicyReport{Result: results[i]}
		var q, jct, mq float64
		var nm int
		for _, j := range pr.Jobs {
			q += j.Queueing()
			jct += j.JCT()
			if j.GPUs > 1 {
				mq += j.Queueing()
				nm++
			}
		}
		if n := float64(len(pr.Jobs)); n > 0 {
			pr.AvgQueue, pr.AvgJCT = q/n, jct/n
		}
		if nm > 0 {
			pr.MultiQueue = mq / float64(nm)
		}
		for _, a := range accounts {
			row := AccountRow{Account: a, Quota: base.Quotas[a]}
			var nmA int
			for _, j := range pr.Jobs {
				if j.Account != a {
					continue
				}
				aj, ok := alone[a][j.ID]
				if !ok {
					row.TooBig++
					continue
				}
				row.Jobs++
				row.SharedQueue += j.Queueing()
				row.SharedJCT += j.JCT()
				row.AloneQueue += aj.Queueing()
				row.AloneJCT += aj.JCT()
				if j.GPUs > 1 {
					row.MultiQueue += j.Queueing()
					nmA++
				}
			}
			if row.Jobs > 0 {
				n := float64(row.Jobs)
				row.SharedQueue, row.SharedJCT, row.AloneQueue, row.AloneJCT = row.SharedQueue/n, row.SharedJCT/n, row.AloneQueue/n, row.AloneJCT/n
			}
			if nmA > 0 {
				row.MultiQueue /= float64(nmA)
			}
			if row.WorseQueue() {
				pr.WorseQueue++
			}
			if row.WorseJCT() {
				pr.WorseJCT++
			}
			pr.Rows = append(pr.Rows, row)
		}
		rep.Policies = append(rep.Policies, pr)
	}
	return rep, nil
}

func mins(s float64) string { return fmt.Sprintf("%.1f", s/60) }

// Write prints the report as Markdown tables.
func (rep Report) Write(w io.Writer) {
	var b strings.Builder
	b.WriteString("| policy | avg queueing (min) | avg JCT (min) | multi-GPU jobs' queueing (min) | accounts worse off than alone: queueing / JCT | fragmentation (% GPUs stranded while jobs wait) | reclaim evictions | work lost (GPU-h) | most evicted in a pass | reclaims blocked |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range rep.Policies {
		blocked := []string{}
		for _, k := range slices.Sorted(maps.Keys(p.Blocked)) {
			blocked = append(blocked, fmt.Sprintf("%s %d", k, p.Blocked[k]))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d / %d of %d | %.2f | %d | %.1f | %d | %s |\n",
			p.Policy, mins(p.AvgQueue), mins(p.AvgJCT), mins(p.MultiQueue), p.WorseQueue, p.WorseJCT, len(p.Rows),
			100*p.Fragmentation, p.Evictions, p.WorkLostGPUSec/3600, p.MaxPerPass, strings.Join(blocked, ", "))
	}
	b.WriteString("\nPer account, average queueing delay and JCT in minutes, shared (each policy) vs alone on its quota's cells (jobs its private cluster can run):\n\n")
	b.WriteString("| account | quota | jobs (too big alone) | alone: queueing / JCT |")
	for _, p := range rep.Policies {
		fmt.Fprintf(&b, " %s: queueing / JCT |", p.Policy)
	}
	b.WriteString("\n|---|---|---|---|")
	for range rep.Policies {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	if len(rep.Policies) > 0 {
		for i, row := range rep.Policies[0].Rows {
			fmt.Fprintf(&b, "| %s | %s | %d (%d) | %s / %s |", row.Account, row.Quota, row.Jobs, row.TooBig, mins(row.AloneQueue), mins(row.AloneJCT))
			for _, p := range rep.Policies {
				r := p.Rows[i]
				mark := ""
				if r.WorseQueue() {
					mark = " ✗"
				}
				fmt.Fprintf(&b, " %s / %s%s |", mins(r.SharedQueue), mins(r.SharedJCT), mark)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\n✗: queueing longer than alone (by over 1%).\n")
	io.WriteString(w, b.String())
}
