package sim

import ()

// FileHeteroMD is the heterogeneous summary's file in a results directory.
const FileHeteroMD = "hetero.md"

// HeteroSummary is what a heterogeneous run adds to its Summary.
type HeteroSummary struct {
	// Config is HeteroConfig.Label: policy and consolidation.
	Config      string       `json:"config"`
	Policy      HeteroPolicy `json:"policy"`
	Consolidate bool         `json:"consolidate"`
	Types       []string     `json:"types"`
	// Util is each type's GPU-seconds held while jobs arrived (first to
	// last submission) over its GPUs × that time.
	Util []float64 `json:"util"`
	// Starts counts the runs started on each type; SpreadStarts those
	// started spread over more nodes than needed.
	Starts       []int `json:"starts"`
	SpreadStarts int   `json:"spread_starts"`
}

func (e *engine) heteroSummary() *HeteroSummary {
	h := e.cluster.het
	if h == nil {
		return nil
	}
	s := &HeteroSummary{
		Config: h.cfg.Label(), Policy: h.cfg.Policy, Consolidate: h.cfg.Consolidate,
		Types: h.cfg.Types, Util: make([]float64, len(h.busy)), Starts: h.starts, SpreadStarts: h.spreads,
	}
	for t, b := range h.busy {
		if gpus := float64(len(h.nodesOf[t]) * e.cfg.Shape.GPUsPerNode); h.window > 0 {
			s.Util[t] = b / (gpus * h.window)
		}
	}
	return s
}
