package placement

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/lachesis-sched/lachesis/internal/util/reasontext"
	"github.com/lachesis-sched/lachesis/policy/gres"
	"github.com/lachesis-sched/lachesis/policy/synergy"
)

// Job is the part of a submission placement looks at (synergy.Request is
// the part sizing looks at), as copied out of
// job_desc_msg_t after job_submit/synergy sized it. Zero means "not given".
type Job struct {
	Name, Comment, Partition string
	GPU                      gres.Request // GPU.Nodes is min_nodes
	MaxNodes                 uint32
	// Features (--constraint), Prefer (--prefer), ReqNodes (--nodelist):
	// any of them means the user chose where to run.
	Features, Prefer, ReqNodes string
	// CPUsPerTRES / MemPerTRES as the job now holds them ("gres:gpu:N"),
	// to check that the nodes a decision points at can hold the job.
	CPUsPerTRES, MemPerTRES string
}

// TypedNode is one node of the job's partition(s), with the features that
// name its GPU type (synergy.Node is one without them).
type TypedNode struct {
	CPUs     int
	MemMB    uint64
	Gres     string // configured gres, e.g. "gpu:a:2"
	Features string // configured features, comma-separated
}

// Placement is what to do with the job. Zero fields leave the job alone.
type Placement struct {
	ModelKey string
	Prefer   string // new --prefer, e.g. "gpu_a" or "gpu_a|gpu_c"
	MaxNodes uint32 // new max_nodes
	Reason   string // for the admin comment ("" = nothing to say)
}

// MaxReason bounds Placement.Reason (the C buffer is 512 bytes).
const MaxReason = 400

type nodeInfo struct {
	typ  string // "" when the node has no type feature
	gpus uint64
	cpus int
	mem  uint64
}

// Place picks a type preference and a node cap for one job.
func Place(cfg Config, req Job, nodes []TypedNode) Placement {
	if !cfg.Enabled {
		return Placement{}
	}
	key := strings.ToLower((&synergy.Request{Name: req.Name, Comment: req.Comment}).ModelKey())
	d := Placement{ModelKey: key}
	m, profiled, ok := cfg.model(key)
	if !ok {
		return d
	}
	total, err := req.GPU.Total()
	if err != nil || total == 0 {
		return d
	}
	info := describeNodes(cfg.FeaturePrefix, nodes)
	// A malformed per-GPU request (sizing refuses those) counts as none.
	cpg, _, _ := gres.CPUsPerGPU(req.CPUsPerTRES)
	mpg, _, _ := gres.MemMBPerGPU(req.MemPerTRES)
	fit := fitter{gpus: total, perNode: req.GPU.GPUsPerNode(total), nodes: max(uint64(req.GPU.Nodes), 1),
		spread: req.GPU.Spreadable(), maxNodes: int(req.MaxNodes), cpg: cpg, mpg: mpg}

	var notes []string
	// Consolidation first: the preference must be satisfiable under the cap.
	if fit.spread && req.MaxNodes == 0 && total > 1 && m.SpreadRatio > 0 {
		if m.SpreadRatio < cfg.SensitiveBelow {
			if k, most := fewestNodes(info, fit); k > 0 {
				d.MaxNodes, fit.maxNodes = uint32(k), k
				notes = append(notes, fmt.Sprintf("spread runs at %.0f%% of consolidated (< %.0f%%): at most %d node(s) of up to %d usable GPUs",
					100*m.SpreadRatio, 100*cfg.SensitiveBelow, k, most))
			}
		} else {
			notes = append(notes, fmt.Sprintf("spread runs at %.0f%% of consolidated: free to spread", 100*m.SpreadRatio))
		}
	}
	switch {
	case req.Prefer != "" || req.Features != "" || req.ReqNodes != "":
		notes = append(notes, "kept the user's --prefer/--constraint/--nodelist")
	case req.GPU.Typed():
		notes = append(notes, "kept the user's GPU type")
	default:
		if pref, why := preferTypes(cfg, key, m, info, fit); pref != "" || why != "" {
			if profiled && pref != "" {
				why += " (speeds from its profiles)"
			}
			d.Prefer = pref
			notes = append(notes, why)
		}
	}
	if len(notes) > 0 {
		d.Reason = clip(fmt.Sprintf("lachesis placement: model=%s: %s", clipName(key), strings.Join(notes, "; ")))
	}
	return d
}

// preferTypes returns the --prefer expression and why (both "" when the
// model has nothing to choose between here).
func preferTypes(cfg Config, key string, m Model, info []nodeInfo, fit fitter) (string, string) {
	here := map[string]bool{}
	for _, n := range info {
		if n.typ != "" && n.gpus > 0 {
			here[n.typ] = true
		}
	}
	var types []string
	for t := range m.Speed {
		if here[t] {
			types = append(types, t)
		}
	}
	sort.Strings(types)
	if len(types) < 2 {
		return "", ""
	}
	adv, others := advantage(cfg, key, m, types)
	best := 0.0
	for _, a := range adv {
		best = max(best, a)
	}
	var chosen []string
	for i, t := range types {
		if adv[i]*cfg.MinAdvantage >= best {
			chosen = append(chosen, t)
		}
	}
	if len(chosen) == len(types) {
		return "", fmt.Sprintf("no GPU type gives it a comparative advantage (vs %d other model(s))", others)
	}
	sel := map[string]bool{}
	for _, t := range chosen {
		sel[t] = true
	}
	var pref []nodeInfo
	for _, n := range info {
		if sel[n.typ] {
			pref = append(pref, n)
		}
	}
	if !fit.holds(pref) {
		// Slurm 22.05 fails or holds a job whose --prefer nodes can never
		// hold it (select_nodes without ignore_prefer_validation).
		return "", fmt.Sprintf("no preference: the nodes of type %s cannot hold the job", strings.Join(chosen, "/"))
	}
	feats := make([]string, len(chosen))
	for i, t := range chosen {
		feats[i] = cfg.FeaturePrefix + t
	}
	var speeds []string
	for i, t := range types {
		speeds = append(speeds, fmt.Sprintf("%s %.3g x%.2f", t, m.Speed[t], adv[i]))
	}
	return strings.Join(feats, "|"), fmt.Sprintf("prefers %s by comparative advantage vs %d other model(s) (speeds %s); soft: starts on another type when these are busy",
		strings.Join(feats, "|"), others, strings.Join(speeds, ", "))
}

// advantage is, for each type, the model's speed there relative to its own
// geometric mean over types, divided by the same quantity for the other
// models of the table that know all these types (geometric mean over them).
// With no other model, it is the model's own relative speed (absolute
// advantage).
func advantage(cfg Config, key string, m Model, types []string) ([]float64, int) {
	rel := func(mm Model) []float64 {
		logs := make([]float64, len(types))
		mean := 0.0
		for i, t := range types {
			logs[i] = math.Log(mm.Speed[t])
			mean += logs[i]
		}
		mean /= float64(len(types))
		for i := range logs {
			logs[i] -= mean
		}
		return logs
	}
	own := rel(m)
	ref := make([]float64, len(types))
	others := 0
	for _, name := range modelNames(&cfg) {
		if name == key {
			continue
		}
		o, _, _ := cfg.model(name)
		complete := true
		for _, t := range types {
			if !(o.Speed[t] > 0) || math.IsInf(o.Speed[t], 0) {
				complete = false
				break
			}
		}
		if !complete {
			continue
		}
		others++
		for i, v := range rel(o) {
			ref[i] += v
		}
	}
	out := make([]float64, len(types))
	for i := range types {
		r := 0.0
		if others > 0 {
			r = ref[i] / float64(others)
		}
		out[i] = math.Exp(own[i] - r)
	}
	return out, others
}

// modelNames is every model with speeds, in the table or profiled, once.
// The order does not matter (advantage sums over them) but is fixed so
// that float sums repeat exactly.
func modelNames(cfg *Config) []string {
	names := make([]string, 0, len(cfg.Models)+len(cfg.Profiled))
	for k := range cfg.Models {
		names = append(names, k)
	}
	for k := range cfg.Profiled {
		if _, dup := cfg.Models[k]; !dup {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return names
}

// fitter checks whether a set of nodes can ever hold the job.
type fitter struct {
	gpus, perNode, nodes uint64
	spread               bool
	maxNodes             int // 0: no cap
	cpg, mpg             uint64
}

// usable is how many of the job's GPUs node n can hold, given the job's
// CPUs and memory per GPU.
func (f fitter) usable(n nodeInfo) uint64 {
	u := n.gpus
	if f.cpg > 0 {
		u = min(u, uint64(max(n.cpus, 0))/f.cpg)
	}
	if f.mpg > 0 {
		u = min(u, n.mem/f.mpg)
	}
	return u
}

func (f fitter) holds(nodes []nodeInfo) bool {
	if !f.spread {
		var ok uint64
		for _, n := range nodes {
			if f.usable(n) >= f.perNode {
				ok++
			}
		}
		return ok >= f.nodes
	}
	us := make([]uint64, 0, len(nodes))
	for _, n := range nodes {
		us = append(us, f.usable(n))
	}
	sort.Slice(us, func(i, j int) bool { return us[i] > us[j] })
	if f.maxNodes > 0 && len(us) > f.maxNodes {
		us = us[:f.maxNodes]
	}
	var sum uint64
	for _, u := range us {
		sum += u
	}
	return sum >= f.gpus
}

// fewestNodes is the smallest node count whose largest nodes hold the job,
// and the most GPUs of the job one node can hold (0, 0: none can).
func fewestNodes(info []nodeInfo, f fitter) (int, uint64) {
	us := make([]uint64, 0, len(info))
	for _, n := range info {
		if u := f.usable(n); u > 0 {
			us = append(us, u)
		}
	}
	sort.Slice(us, func(i, j int) bool { return us[i] > us[j] })
	var sum uint64
	for i, u := range us {
		sum += u
		if sum >= f.gpus {
			return i + 1, us[0]
		}
	}
	return 0, 0
}

func describeNodes(prefix string, nodes []TypedNode) []nodeInfo {
	out := make([]nodeInfo, 0, len(nodes))
	for _, n := range nodes {
		g, err := gres.NodeGPUs(n.Gres)
		if err != nil {
			g = 0
		}
		ni := nodeInfo{gpus: g, cpus: n.CPUs, mem: n.MemMB}
		for _, f := range strings.Split(n.Features, ",") {
			if t, ok := strings.CutPrefix(strings.TrimSpace(f), prefix); ok && t != "" && prefix != "" {
				ni.typ = strings.ToLower(t)
				break
			}
		}
		out = append(out, ni)
	}
	return out
}

// clipName is a user-chosen name as the admin comment shows it: it can
// never spell a marker (reasontext.Field).
func clipName(s string) string { return reasontext.Field(s, 64) }

func clip(s string) string { return reasontext.Clip(s, MaxReason) }
