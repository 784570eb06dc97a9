// Package quota is guaranteed GPU quotas in affinity cells (issue 35,
// HiveD): an account's quota text ("2 nodes of 8 GPUs", "16 GPUs in cells
// of 4") parsed and bound to the cluster's cells (policy/cells), which of
// an account's jobs run within its quota and which borrow, and the choice
// of the borrowed jobs a reclaim evicts: the fewest GPU-seconds of running
// work lost, never more than a bound per pass, never a job within its own
// account's quota.
//
// Pure Go, no I/O: slurmctld's core and the simulator call the same rules.
package quota

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/lachesis-sched/lachesis/policy/cells"
)

// ErrBadQuota is wrapped by every error about a quota's text or its fit.
var ErrBadQuota = errors.New("bad quota")

// Limits on what a configuration may hold.
const (
	MaxAccounts       = 1024
	MaxAccountLen     = 64
	MaxCells          = 4096
	MaxReclaimPerPass = 64
	// DefaultMaxReclaimPerPass bounds the victims of one pass's reclaims
	// when quota.max_reclaim_per_pass is left out.
	DefaultMaxReclaimPerPass = 4
)

// Spec is one account's quota: Cells cells of CellGPUs GPUs each.
type Spec struct {
	Cells    int
	CellGPUs int
	// Nodes: the cells are whole nodes of CellGPUs GPUs, all under one
	// leaf switch ("N nodes of G GPUs"), so that the owner's job of
	// several nodes finds them in one piece, as Slurm's topology/tree
	// places it.
	Nodes bool
}

// GPUs is the quota's size in GPUs.
func (s Spec) GPUs() int { return s.Cells * s.CellGPUs }

func (s Spec) String() string {
	if s.Nodes && s.Cells == 1 {
		return fmt.Sprintf("1 node of %d GPUs", s.CellGPUs)
	}
	if s.Nodes {
		return fmt.Sprintf("%d nodes of %d GPUs under one switch", s.Cells, s.CellGPUs)
	}
	return fmt.Sprintf("%d GPUs in cells of %d", s.GPUs(), s.CellGPUs)
}

// bindSize is the GPUs the quota binds in one piece: all its nodes
// together, else one cell.
func (s Spec) bindSize() int {
	if s.Nodes {
		return s.GPUs()
	}
	return s.CellGPUs
}

var (
	nodesOf  = regexp.MustCompile(`^(\d+) nodes? of (\d+) gpus?$`)
	cellsOf  = regexp.MustCompile(`^(\d+) cells? of (\d+) gpus?$`)
	gpusIn   = regexp.MustCompile(`^(\d+) gpus? in cells? of (\d+)(?: gpus?)?$`)
	gpusOnly = regexp.MustCompile(`^(\d+) gpus?$`)
)

// Parse reads a quota: "N nodes of G GPUs", "N cells of G GPUs", "N GPUs
// in cells of C" (N a multiple of C) or "N GPUs" (cells of one GPU).
func Parse(text string) (Spec, error) {
	s := strings.Join(strings.Fields(strings.ToLower(text)), " ")
	num := func(x string) (int, error) {
		v, err := strconv.Atoi(x)
		if err != nil || v < 1 || v > 1<<20 {
			return 0, fmt.Errorf("%w: %q is not a count from 1 to %d", ErrBadQuota, x, 1<<20)
		}
		return v, nil
	}
	var spec Spec
	var a, b string
	nodes := false
	switch {
	case len(s) > 64:
		return Spec{}, fmt.Errorf("%w: %d bytes, at most 64", ErrBadQuota, len(s))
	case nodesOf.MatchString(s):
		m := nodesOf.FindStringSubmatch(s)
		a, b, nodes = m[1], m[2], true
	case cellsOf.MatchString(s):
		m := cellsOf.FindStringSubmatch(s)
		a, b = m[1], m[2]
	case gpusIn.MatchString(s):
		m := gpusIn.FindStringSubmatch(s)
		total, err := num(m[1])
		if err != nil {
			return Spec{}, err
		}
		size, err := num(m[2])
		if err != nil {
			return Spec{}, err
		}
		if total%size != 0 {
			return Spec{}, fmt.Errorf("%w: %d GPUs are not a whole number of cells of %d", ErrBadQuota, total, size)
		}
		spec = Spec{Cells: total / size, CellGPUs: size}
	case gpusOnly.MatchString(s):
		a, b = gpusOnly.FindStringSubmatch(s)[1], "1"
	default:
		return Spec{}, fmt.Errorf(`%w: %q: write "N nodes of G GPUs", "N cells of G GPUs", "N GPUs in cells of C" or "N GPUs"`, ErrBadQuota, text)
	}
	if spec.Cells == 0 {
		n, err := num(a)
		if err != nil {
			return Spec{}, err
		}
		g, err := num(b)
		if err != nil {
			return Spec{}, err
		}
		spec = Spec{Cells: n, CellGPUs: g, Nodes: nodes}
	}
	if spec.Cells > MaxCells {
		return Spec{}, fmt.Errorf("%w: %d cells, at most %d", ErrBadQuota, spec.Cells, MaxCells)
	}
	return spec, nil
}

// Binding is every account's quota bound to cells of one cluster.
type Binding struct {
	// Accounts in a fixed order; an account's index is its cell owner id.
	Accounts []string
	Specs    []Spec
	// Cells[i] lists the cells bound to account i.
	Cells [][]int
	// Tree is the cluster the cells are bound in (cells.Tree.NodeOwners
	// says which accounts a node's GPUs are bound to). Read only: its
	// free GPUs are not the cluster's.
	Tree  *cells.Tree
	index map[string]int
}

// Bind checks the quotas against the cluster's real shape and binds each
// account's cells (largest cells first, accounts by name, so a binding is
// the same at every start). An error names the account's key.
func Bind(tree *cells.Tree, specs map[string]Spec) (*Binding, error) {
	if len(specs) > MaxAccounts {
		return nil, fmt.Errorf("%w: quota.accounts: %d accounts, at most %d", ErrBadQuota, len(specs), MaxAccounts)
	}
	b := &Binding{index: map[string]int{}, Tree: tree}
	total := 0
	for _, a := range slices.Sorted(maps.Keys(specs)) {
		b.index[a] = len(b.Accounts)
		b.Accounts = append(b.Accounts, a)
		b.Specs = append(b.Specs, specs[a])
		b.Cells = append(b.Cells, nil)
		// The error names the account that takes the sum over.
		if total += specs[a].GPUs(); total > tree.GPUs() {
			return nil, &AccountError{Account: a, Spec: specs[a],
				Why: fmt.Sprintf("the quotas add up to %d GPUs with it (accounts by name), the cluster has %d", total, tree.GPUs())}
		}
	}
	order := make([]int, len(b.Accounts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(x, y int) bool { return b.Specs[order[x]].bindSize() > b.Specs[order[y]].bindSize() })
	for _, i := range order {
		if b.Specs[i].Nodes {
			got, err := tree.BindNodes(i, b.Specs[i].Cells, b.Specs[i].CellGPUs)
			if err != nil {
				return nil, fmt.Errorf("%w: quota.accounts.%s (%s): %w", ErrBadQuota, b.Accounts[i], b.Specs[i], err)
			}
			b.Cells[i] = got
			continue
		}
		for c := 0; c < b.Specs[i].Cells; c++ {
			got, err := tree.Bind(i, b.Specs[i].CellGPUs)
			if err != nil {
				return nil, &AccountError{Account: b.Accounts[i], Spec: b.Specs[i],
					Why: fmt.Sprintf("cell %d of %d: %v", c+1, b.Specs[i].Cells, err), Err: err}
			}
			b.Cells[i] = append(b.Cells[i], got...)
		}
	}
	return b, nil
}

// AccountError is one account's quota that the cluster cannot hold. Its
// text names the account's key in lachesis.yaml (quota.accounts.ACCOUNT);
// a caller that read the quota elsewhere (slurmdbd) names it its own way
// from Account and Why.
type AccountError struct {
	Account string
	Spec    Spec
	Why     string // what does not fit, without the account
	Err     error  // the cells' error, if any
}

func (e *AccountError) Error() string {
	return fmt.Sprintf("%v: quota.accounts.%s (%s): %s", ErrBadQuota, e.Account, e.Spec, e.Why)
}

func (e *AccountError) Unwrap() []error { return []error{ErrBadQuota, e.Err} }

// Index is an account's owner id, -1 for an account without a quota.
func (b *Binding) Index(account string) int {
	if b == nil {
		return -1
	}
	if i, ok := b.index[account]; ok {
		return i
	}
	return -1
}

// GPUs is an account's quota in GPUs (0 without one).
func (b *Binding) GPUs(account string) int {
	if i := b.Index(account); i >= 0 {
		return b.Specs[i].GPUs()
	}
	return 0
}

// Within says whether a job of gpus GPUs of an account that already holds
// held GPUs within its quota runs within the quota (guaranteed) or borrows.
// An account without a quota always borrows, which is today's fair share.
func Within(quotaGPUs, held, gpus int) bool {
	return gpus > 0 && held+gpus <= quotaGPUs
}

// Classify walks an account's jobs in their order (Tiresias's, best
// first) and says which fit within its quota (first fit: a smaller job
// after one that did not fit may still fit) and which borrow.
func Classify(quotaGPUs int, gpus []int) []bool {
	out := make([]bool, len(gpus))
	held := 0
	for i, g := range gpus {
		if Within(quotaGPUs, held, g) {
			out[i] = true
			held += g
		}
	}
	return out
}
