package quota

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Candidate is a running job a reclaim may evict.
type Candidate struct {
	Job     uint32
	Account string
	// Room is the index (in Request.Rooms) of the room its GPUs are in,
	// GPUsIn how many of them; a job outside every room is not a candidate.
	Room   int
	GPUsIn int
	// WorkLost is what evicting it throws away: GPU-seconds since its last
	// checkpoint where known, else since it started.
	WorkLost float64
	// Within: the job runs within its own account's quota; never evicted.
	Within bool
}

// Room is a place the reclaiming job could run once freed: one of its
// account's quota cells (or, without cells, its account's share of the
// cluster as one room).
type Room struct {
	ID   int // the caller's name for it (a cell id)
	GPUs int
	Free int
}

// Request is one reclaim: an account's within-quota job of GPUs GPUs.
type Request struct {
	Account    string
	GPUs       int
	Rooms      []Room
	Candidates []Candidate
	// MaxVictims is what is left of quota.max_reclaim_per_pass this pass.
	MaxVictims int
	// Partial: when no room can be freed within MaxVictims, start on the
	// cheapest room anyway with MaxVictims of its victims (the least work
	// first); the caller keeps the room for the job and finishes at later
	// passes. The bound still holds per pass.
	Partial bool
}

// Plan is the chosen reclaim.
type Plan struct {
	Room      int // index into Request.Rooms
	Victims   []Candidate
	WorkLost  float64
	GPUsFreed int
	// Remaining: a partial plan's victims left for later passes.
	Remaining int
}

// exactUpTo: a room with at most this many candidates is searched
// exhaustively (2^12 subsets); more take the greedy choice.
const exactUpTo = 12

// Choose picks the room and the borrowed jobs in it whose eviction frees
// the request's GPUs with the least running work lost (ties: fewer
// victims, then fewer GPUs evicted, then the lower room). A room already
// free enough needs no victim. A reclaim that cannot be done says why:
// the rooms are held by jobs within their own quotas, or freeing one would
// take more victims than the bound.
func Choose(r Request) (Plan, error) {
	if r.GPUs <= 0 {
		return Plan{}, fmt.Errorf("%w: a reclaim for %d GPUs", ErrBadQuota, r.GPUs)
	}
	best := Plan{Room: -1}
	bestCost := [3]float64{math.Inf(1)}
	tooMany, held := 0, false
	for ri, room := range r.Rooms {
		if room.GPUs < r.GPUs {
			continue
		}
		need := r.GPUs - room.Free
		var cands []Candidate
		for _, c := range r.Candidates {
			if c.Room != ri || c.GPUsIn <= 0 || c.Account == r.Account {
				continue
			}
			if c.Within {
				held = true
				continue
			}
			cands = append(cands, c)
		}
		victims, ok := cheapest(cands, need, r.MaxVictims)
		if !ok {
			if n := fewestVictims(cands, need); n > r.MaxVictims {
				tooMany = max(tooMany, n)
			}
			continue
		}
		p := Plan{Room: ri, Victims: victims}
		for _, v := range victims {
			p.WorkLost += v.WorkLost
			p.GPUsFreed += v.GPUsIn
		}
		cost := [3]float64{p.WorkLost, float64(len(victims)), float64(p.GPUsFreed)}
		if slices.Compare(cost[:], bestCost[:]) < 0 {
			best, bestCost = p, cost
		}
	}
	if best.Room >= 0 {
		return best, nil
	}
	if r.Partial && tooMany > 0 && r.MaxVictims > 0 {
		full := r
		full.Partial = false
		full.MaxVictims = len(r.Candidates)
		if p, err := Choose(full); err == nil && len(p.Victims) > r.MaxVictims {
			slices.SortStableFunc(p.Victims, func(a, b Candidate) int { return cmp.Compare(a.WorkLost, b.WorkLost) })
			p.Remaining = len(p.Victims) - r.MaxVictims
			p.Victims = p.Victims[:r.MaxVictims]
			p.WorkLost, p.GPUsFreed = 0, 0
			for _, v := range p.Victims {
				p.WorkLost += v.WorkLost
				p.GPUsFreed += v.GPUsIn
			}
			return p, nil
		}
	}
	switch {
	case tooMany > 0:
		return Plan{}, fmt.Errorf("%w: reclaiming %d GPUs for %s would evict %d jobs, quota.max_reclaim_per_pass leaves %d this pass",
			ErrBlocked, r.GPUs, r.Account, tooMany, r.MaxVictims)
	case held:
		return Plan{}, fmt.Errorf("%w: the cells of %s that hold %d GPUs are taken by jobs within their own accounts' quotas",
			ErrBlocked, r.Account, r.GPUs)
	default:
		return Plan{}, fmt.Errorf("%w: %s has no quota cell of %d GPUs that borrowers could free", ErrBlocked, r.Account, r.GPUs)
	}
}

// ErrBlocked is wrapped by Choose's answer when no reclaim can be made now.
var ErrBlocked = fmt.Errorf("reclaim blocked")

// fewestVictims is the fewest candidates whose GPUs reach need (largest
// first), or a number above len(cands) when they cannot.
func fewestVictims(cands []Candidate, need int) int {
	g := make([]int, len(cands))
	for i, c := range cands {
		g[i] = c.GPUsIn
	}
	slices.SortFunc(g, func(a, b int) int { return b - a })
	got := 0
	for i, x := range g {
		if got >= need {
			return i
		}
		got += x
	}
	if got >= need {
		return len(g)
	}
	return len(g) + 1
}

// cheapest is the subset of at most maxN candidates freeing at least need
// GPUs with the least work lost (ties: fewer victims, fewer GPUs).
func cheapest(cands []Candidate, need, maxN int) ([]Candidate, bool) {
	if need <= 0 {
		return nil, true
	}
	if maxN <= 0 {
		return nil, false
	}
	better := func(w float64, n, g int, bw float64, bn, bg int) bool {
		if w != bw {
			return w < bw
		}
		if n != bn {
			return n < bn
		}
		return g < bg
	}
	if len(cands) <= exactUpTo {
		bestMask, bw, bn, bg := -1, 0.0, 0, 0
		for mask := 1; mask < 1<<len(cands); mask++ {
			w, n, g := 0.0, 0, 0
			for i := range cands {
				if mask&(1<<i) != 0 {
					w += cands[i].WorkLost
					n++
					g += cands[i].GPUsIn
				}
			}
			if n > maxN || g < need {
				continue
			}
			if bestMask < 0 || better(w, n, g, bw, bn, bg) {
				bestMask, bw, bn, bg = mask, w, n, g
			}
		}
		if bestMask < 0 {
			return nil, false
		}
		var out []Candidate
		for i := range cands {
			if bestMask&(1<<i) != 0 {
				out = append(out, cands[i])
			}
		}
		return out, true
	}
	// Greedy: least work per GPU first, then drop any victim the rest do
	// without (the costliest first).
	s := slices.Clone(cands)
	slices.SortStableFunc(s, func(a, b Candidate) int {
		return cmp.Compare(a.WorkLost/float64(a.GPUsIn), b.WorkLost/float64(b.GPUsIn))
	})
	got, k := 0, 0
	for k < len(s) && got < need {
		got += s[k].GPUsIn
		k++
	}
	if got < need {
		return nil, false
	}
	out := s[:k:k]
	slices.SortStableFunc(out, func(a, b Candidate) int { return cmp.Compare(b.WorkLost, a.WorkLost) })
	for i := 0; i < len(out); {
		if got-out[i].GPUsIn >= need {
			got -= out[i].GPUsIn
			out = slices.Delete(out, i, i+1)
			continue
		}
		i++
	}
	if len(out) > maxN {
		return nil, false
	}
	return out, true
}

// Reason is the line a victim's reason and slurmctld's log carry.
func (p Plan) Reason(account string, gpus int) string {
	return fmt.Sprintf("quota reclaim: %s took back %d GPUs of its quota (%d jobs evicted, %.0f GPU-s of work lost)",
		account, gpus, len(p.Victims), p.WorkLost)
}
