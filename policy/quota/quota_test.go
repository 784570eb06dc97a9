package quota

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/policy/cells"
)

func TestParse(t *testing.T) {
	for text, want := range map[string]Spec{
		"2 nodes of 8 GPUs":          {2, 8, true},
		"1 node of 8 gpus":           {1, 8, true},
		"16 GPUs in cells of 4":      {4, 4, false},
		"16 gpus in cells of 4 GPUs": {4, 4, false},
		"3 cells of 2 GPUs":          {3, 2, false},
		"  5   GPUs ":                {5, 1, false},
	} {
		got, err := Parse(text)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", text, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "0 GPUs", "10 GPUs in cells of 4", "-1 nodes of 8 GPUs",
		"99999999999 GPUs", "5000 cells of 1 GPU", strings.Repeat("9", 80) + " GPUs"} {
		if _, err := Parse(bad); !errors.Is(err, ErrBadQuota) {
			t.Errorf("Parse(%q): %v, want ErrBadQuota", bad, err)
		}
	}
}

func TestBindFitsTheClusterOrNamesTheKey(t *testing.T) {
	tree, _ := cells.New(cells.Uniform(4, 8, 2))
	b, err := Bind(tree, map[string]Spec{"vision": {2, 8, false}, "nlp": {3, 4, false}, "small": {3, 1, false}})
	if err != nil {
		t.Fatal(err)
	}
	if b.GPUs("vision") != 16 || b.GPUs("nlp") != 12 || b.GPUs("none") != 0 || b.Index("none") != -1 {
		t.Fatalf("quota GPUs: %d %d %d", b.GPUs("vision"), b.GPUs("nlp"), b.GPUs("none"))
	}
	if len(b.Cells[b.Index("nlp")]) != 3 {
		t.Fatalf("nlp cells %v", b.Cells[b.Index("nlp")])
	}

	tree, _ = cells.New(cells.Uniform(4, 8, 2))
	_, err = Bind(tree, map[string]Spec{"big": {5, 8, false}})
	if !errors.Is(err, ErrBadQuota) || !strings.Contains(err.Error(), "quota.accounts") {
		t.Fatalf("over the cluster: %v", err)
	}
	tree, _ = cells.New(cells.Uniform(4, 8, 2))
	_, err = Bind(tree, map[string]Spec{"odd": {2, 3, false}})
	if !errors.Is(err, ErrBadQuota) || !strings.Contains(err.Error(), "quota.accounts.odd") {
		t.Fatalf("no cell of 3: %v", err)
	}
	// Three nodes under one switch do not exist (switches of 2).
	tree, _ = cells.New(cells.Uniform(4, 8, 2))
	_, err = Bind(tree, map[string]Spec{"wide": {1, 24, false}})
	if !errors.Is(err, ErrBadQuota) || !strings.Contains(err.Error(), "quota.accounts.wide") {
		t.Fatalf("a 3-node cell on 2-node switches: %v", err)
	}
}

func TestClassifyFirstFit(t *testing.T) {
	got := Classify(8, []int{4, 8, 2, 2, 1})
	if want := []bool{true, false, true, true, false}; !slices.Equal(got, want) {
		t.Fatalf("Classify = %v, want %v", got, want)
	}
	if slices.Contains(Classify(0, []int{1, 2}), true) {
		t.Fatal("an account without a quota had a job within it")
	}
}

func TestChooseEvictsTheLeastWork(t *testing.T) {
	// One 8-GPU room with 2 free: 6 GPUs are needed. Of the sets that
	// free 6, the young 4-GPU job and the young 2-GPU job lose least (60
	// GPU-s); the old 4-GPU job (1,000) is spared.
	r := Request{Account: "owner", GPUs: 8, MaxVictims: 4,
		Rooms: []Room{{ID: 7, GPUs: 8, Free: 2}},
		Candidates: []Candidate{
			{Job: 1, Account: "b", Room: 0, GPUsIn: 4, WorkLost: 1000},
			{Job: 2, Account: "b", Room: 0, GPUsIn: 2, WorkLost: 100},
			{Job: 3, Account: "c", Room: 0, GPUsIn: 4, WorkLost: 50},
			{Job: 4, Account: "c", Room: 0, GPUsIn: 2, WorkLost: 10},
		}}
	p, err := Choose(r)
	if err != nil {
		t.Fatal(err)
	}
	ids := []uint32{}
	for _, v := range p.Victims {
		ids = append(ids, v.Job)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []uint32{3, 4}) || p.WorkLost != 60 || p.GPUsFreed != 6 {
		t.Fatalf("victims %v (%v GPU-s, %d GPUs), want jobs 3 and 4 (60 GPU-s, 6 GPUs)", ids, p.WorkLost, p.GPUsFreed)
	}
}

func TestChoosePicksTheCheaperRoom(t *testing.T) {
	r := Request{Account: "owner", GPUs: 4, MaxVictims: 4,
		Rooms: []Room{{ID: 1, GPUs: 4}, {ID: 2, GPUs: 4}, {ID: 3, GPUs: 2, Free: 2}},
		Candidates: []Candidate{
			{Job: 1, Account: "b", Room: 0, GPUsIn: 4, WorkLost: 900},
			{Job: 2, Account: "b", Room: 1, GPUsIn: 2, WorkLost: 200},
			{Job: 3, Account: "b", Room: 1, GPUsIn: 2, WorkLost: 300},
		}}
	p, err := Choose(r)
	if err != nil || p.Room != 1 || p.WorkLost != 500 {
		t.Fatalf("plan %+v, %v; want room 1 at 500 GPU-s", p, err)
	}
}

func TestChooseNeverEvictsWithinQuotaNorOwnAccount(t *testing.T) {
	r := Request{Account: "owner", GPUs: 4, MaxVictims: 4,
		Rooms: []Room{{ID: 1, GPUs: 4}},
		Candidates: []Candidate{
			{Job: 1, Account: "b", Room: 0, GPUsIn: 2, WorkLost: 1, Within: true},
			{Job: 2, Account: "owner", Room: 0, GPUsIn: 2, WorkLost: 1},
			{Job: 3, Account: "c", Room: 0, GPUsIn: 2, WorkLost: 1},
		}}
	_, err := Choose(r)
	if !errors.Is(err, ErrBlocked) || !strings.Contains(err.Error(), "within their own") {
		t.Fatalf("got %v, want blocked by within-quota jobs", err)
	}
}

func TestChooseHoldsTheBound(t *testing.T) {
	r := Request{Account: "owner", GPUs: 8, MaxVictims: 2,
		Rooms: []Room{{ID: 1, GPUs: 8}}}
	for j := uint32(1); j <= 8; j++ {
		r.Candidates = append(r.Candidates, Candidate{Job: j, Account: "b", Room: 0, GPUsIn: 1, WorkLost: float64(j)})
	}
	_, err := Choose(r)
	if !errors.Is(err, ErrBlocked) || !strings.Contains(err.Error(), "max_reclaim_per_pass") {
		t.Fatalf("got %v, want blocked by the bound", err)
	}
	r.Partial = true
	p, err := Choose(r)
	if err != nil || len(p.Victims) != 2 || p.Remaining != 6 || p.WorkLost != 1+2 {
		t.Fatalf("partial: %+v %v, want the 2 cheapest now and 6 left", p, err)
	}
	r.Partial = false
	r.MaxVictims = 8
	p, err = Choose(r)
	if err != nil || len(p.Victims) != 8 {
		t.Fatalf("with the bound at 8: %+v %v", p, err)
	}
}

func TestChooseGreedyOnManyCandidates(t *testing.T) {
	r := Request{Account: "owner", GPUs: 4, MaxVictims: 4, Rooms: []Room{{ID: 1, GPUs: 64}}}
	for j := uint32(1); j <= 40; j++ {
		r.Candidates = append(r.Candidates, Candidate{Job: j, Account: "b", Room: 0, GPUsIn: 2, WorkLost: float64(100 - j)})
	}
	p, err := Choose(r)
	if err != nil || len(p.Victims) != 2 || p.WorkLost != 60+61 {
		t.Fatalf("greedy: %+v %v, want the two youngest (121 GPU-s)", p, err)
	}
}

func TestPlanReasonSaysWhoTookWhat(t *testing.T) {
	p := Plan{Victims: []Candidate{{Job: 1}, {Job: 2}}, WorkLost: 7200}
	got := p.Reason("vision", 8)
	for _, want := range []string{"vision", "8 GPUs", "2 jobs", "7200 GPU-s"} {
		if !strings.Contains(got, want) {
			t.Errorf("reason %q lacks %q", got, want)
		}
	}
}

// "N nodes of G GPUs" is N whole nodes under one leaf switch: bound in
// one piece where a switch holds them, else an error naming the key and
// how many unbound nodes each switch has.
func TestBindNodesQuotaUnderOneSwitch(t *testing.T) {
	topo := cells.Topology{Switches: []cells.Switch{
		{Name: "s1", Nodes: []cells.Node{{Name: "a", GPUs: 4}}},
		{Name: "s2", Nodes: []cells.Node{{Name: "b", GPUs: 4}, {Name: "c", GPUs: 4}}},
	}}
	tree, _ := cells.New(topo)
	spec, err := Parse("2 nodes of 4 GPUs")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Bind(tree, map[string]Spec{"own": spec, "one": {1, 4, true}})
	if err != nil {
		t.Fatal(err)
	}
	var sw []string
	for _, c := range b.Cells[b.Index("own")] {
		sw = append(sw, tree.SwitchName(tree.Cell(c).Switch))
	}
	if strings.Join(sw, ",") != "s2,s2" {
		t.Fatalf("own's nodes under switches %v; want both under s2", sw)
	}
	if c := b.Cells[b.Index("one")]; len(c) != 1 || tree.Cell(c[0]).Switch != 0 {
		t.Fatalf("one's node %v; want the node of s1", c)
	}
	// Two switches of one node each: 8 GPUs fit the cluster, not a switch.
	topo.Switches[1].Nodes = topo.Switches[1].Nodes[:1]
	tree, _ = cells.New(topo)
	_, err = Bind(tree, map[string]Spec{"own": spec})
	want := "quota.accounts.own (2 nodes of 4 GPUs under one switch): bad cell topology: no leaf switch has 2 unbound nodes of 4 GPUs (unbound nodes of 4 GPUs per switch: s1 1, s2 1)"
	if !errors.Is(err, ErrBadQuota) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v; want it to say %q", err, want)
	}
}
