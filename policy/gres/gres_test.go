package gres

import (
	"errors"
	"strings"
	"testing"
)

func TestGPUs(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want uint64
		err  bool
	}{
		{"empty string is zero GPUs", "", 0, false},
		{"untyped count", "gres:gpu:2", 2, false},
		{"typed count", "gres:gpu:a100:4", 4, false},
		{"bare gpu is one", "gres:gpu", 1, false},
		{"type without count is one", "gres/gpu:a100", 1, false},
		{"tres form with equals", "gres/gpu=3", 3, false},
		{"typed tres form", "gres/gpu:v100=2", 2, false},
		{"user --gres form", "gpu:2", 2, false},
		{"other gres ignored", "gres:nic:1,gres:gpu:2", 2, false},
		{"several gpu entries sum", "gres:gpu:a100:1,gres:gpu:v100:2", 3, false},
		{"non-numeric count is an error", "gres:gpu:a100:x", 0, true},
		{"negative count is an error", "gres:gpu:-1", 0, true},
		{"absurd count is an error", "gres:gpu:99999999999", 0, true},
		{"empty entry is an error", "gres:gpu:1,,", 0, true},
		{"too many fields is an error", "gres:gpu:a:b:c", 0, true},
		{"empty type is an error", "gres:gpu::2", 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := GPUs(c.in)
			if c.err {
				if !errors.Is(err, ErrSyntax) {
					t.Fatalf("GPUs(%q) = %d, %v; want ErrSyntax", c.in, got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("GPUs(%q) = %d, %v; want %d", c.in, got, err, c.want)
			}
		})
	}
}

func TestRequestTotal(t *testing.T) {
	cases := []struct {
		name string
		req  Request
		want uint64
	}{
		{"per-job count is taken as is", Request{PerJob: "gres:gpu:3", Nodes: 2}, 3},
		{"per-node count multiplies by nodes", Request{PerNode: "gres:gpu:2", Nodes: 3}, 6},
		{"per-task count multiplies by tasks", Request{PerTask: "gres:gpu:1", Tasks: 4}, 4},
		{"zero nodes counts as one", Request{PerNode: "gres:gpu:4"}, 4},
		{"no request is zero", Request{Nodes: 1}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.req.Total()
			if err != nil || got != c.want {
				t.Fatalf("Total() = %d, %v; want %d", got, err, c.want)
			}
		})
	}
}

// TestNodeGPUs covers the node gres strings slurmctld writes back
// (gres.c, _build_node_gres_str) once gres.conf ties GPUs to cores, and the
// gres-used form with indexes: the suffix is read, a malformed one refused.
func TestNodeGPUs(t *testing.T) {
	cases := []struct {
		name        string
		in          string
		gpus, shard uint64
		err         bool
	}{
		{"plain count", "gpu:4", 4, 0, false},
		{"socket range", "gpu:4(S:0-1)", 4, 0, false},
		{"typed with one socket", "gpu:a100:4(S:0)", 4, 0, false},
		{"socket list with a comma", "gpu:4(S:0,2),shard:16(S:0,2)", 4, 16, false},
		{"gpu and shard both with sockets", "gpu:2(S:0),shard:8(S:0)", 2, 8, false},
		{"two types on different sockets", "gpu:a:2(S:0),gpu:b:2(S:1)", 4, 0, false},
		{"typed with sockets next to mps", "gpu:tesla:2(S:0-1),mps:200", 2, 0, false},
		{"gres-used index suffix", "gpu:tesla:2(IDX:0-1)", 2, 0, false},
		{"gres-used with nothing allocated", "gpu:tesla:0(IDX:N/A)", 0, 0, false},
		{"count with a unit", "gpu:2,shard:1K", 2, 1024, false},
		{"unit and socket", "gpu:2(S:0),shard:2K(S:0)", 2, 2048, false},
		{"empty socket list is an error", "gpu:4(S:)", 0, 0, true},
		{"unknown suffix is an error", "gpu:4(X:0)", 0, 0, true},
		{"unclosed suffix is an error", "gpu:4(S:0", 0, 0, true},
		{"unopened parenthesis is an error", "gpu:4S:0)", 0, 0, true},
		{"nested suffix is an error", "gpu:4(S:(0))", 0, 0, true},
		{"text after the suffix is an error", "gpu:4(S:0)x", 0, 0, true},
		{"two suffixes are an error", "gpu:4(S:0)(S:1)", 0, 0, true},
		{"backwards range is an error", "gpu:4(S:1-0)", 0, 0, true},
		{"open range is an error", "gpu:4(S:0-)", 0, 0, true},
		{"signed socket is an error", "gpu:4(S:+1)", 0, 0, true},
		{"word for a socket is an error", "gpu:4(S:zero)", 0, 0, true},
		{"overlong suffix is an error", "gpu:4(S:" + strings.Repeat("0,", 200) + "0)", 0, 0, true},
		{"unit past the bound is an error", "gpu:2P", 0, 0, true},
		{"unit alone is an error", "gpu:a:K", 0, 0, true},
		{"unknown unit is an error", "gpu:4X", 0, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, gerr := NodeGPUs(c.in)
			sh, serr := Shards(c.in)
			if c.err {
				// Shards skips gpu entries: give it the entry as a shard.
				sh, serr = Shards(strings.ReplaceAll(c.in, "gpu", "shard"))
				if !errors.Is(gerr, ErrSyntax) || !errors.Is(serr, ErrSyntax) {
					t.Fatalf("NodeGPUs/Shards(%q) = %d, %v / %d, %v; want ErrSyntax", c.in, g, gerr, sh, serr)
				}
				return
			}
			if gerr != nil || serr != nil || g != c.gpus || sh != c.shard {
				t.Fatalf("NodeGPUs/Shards(%q) = %d, %v / %d, %v; want %d / %d", c.in, g, gerr, sh, serr, c.gpus, c.shard)
			}
		})
	}
}

// A job's request never carries a node's suffixes: Slurm refuses
// "--gres=gpu:2(S:0)", and so does GPUs.
func TestGPUsRefusesNodeSuffixInARequest(t *testing.T) {
	for _, in := range []string{"gres:gpu:2(S:0)", "gpu:2(S:0-1)", "gres:gpu:1K"} {
		if n, err := GPUs(in); !errors.Is(err, ErrSyntax) {
			t.Errorf("GPUs(%q) = %d, %v; want ErrSyntax", in, n, err)
		}
	}
}

func FuzzGPUs(f *testing.F) {
	for _, s := range []string{"gres:gpu:2", "gres/gpu:a100=4", "gpu", "gres:nic:1,gres:gpu:1", ":::", "gres:gpu:18446744073709551615",
		"gpu:a100:4(S:0-1)", "gpu:2(S:0,2),shard:8(S:0,2)", "gpu:tesla:2(IDX:N/A)", "shard:1K(S:0)", "gpu:4((S:0)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, read := range []struct {
			name string
			f    func(string) (uint64, error)
		}{{"GPUs", GPUs}, {"NodeGPUs", NodeGPUs}, {"Shards", Shards}} {
			n, err := read.f(s)
			if err == nil && n > MaxCount {
				t.Fatalf("%s(%q) = %d exceeds MaxCount without an error", read.name, s, n)
			}
			if err != nil && !errors.Is(err, ErrSyntax) {
				t.Fatalf("%s(%q): error %v does not wrap ErrSyntax", read.name, s, err)
			}
		}
		// A request string without parentheses is also a node string:
		// what GPUs reads, NodeGPUs reads the same.
		if n, err := GPUs(s); err == nil && !strings.ContainsAny(s, "()") {
			if m, err := NodeGPUs(s); err != nil || m != n {
				t.Fatalf("GPUs(%q) = %d but NodeGPUs = %d, %v", s, n, m, err)
			}
		}
	})
}

// The per-GPU strings both sizing and placement read, with the hostile
// inputs each of them was tested with. Sizing's stricter rule is the one
// kept: zero, a fourth field, a bare "gpu" and a unit on a CPU count are
// errors (placement used to read them as 0, the last field, the next entry
// and 1024 CPUs per G).
func TestPerGPU(t *testing.T) {
	cases := []struct {
		name      string
		in        string
		cpus, mem uint64 // want from CPUsPerGPU, MemMBPerGPU
		found     bool
		cpuErr    bool
		memErr    bool
	}{
		{name: "empty is no request", in: ""},
		{name: "blank is no request", in: "  "},
		{name: "other tres only is no request", in: "gres:nic:1"},
		{name: "gres colon form", in: "gres:gpu:4", cpus: 4, mem: 4, found: true},
		{name: "gres slash form", in: "gres/gpu:4", cpus: 4, mem: 4, found: true},
		{name: "bare user form", in: "gpu:4", cpus: 4, mem: 4, found: true},
		{name: "typed entry", in: "gres:gpu:a100:3", cpus: 3, mem: 3, found: true},
		{name: "gpu entry among others", in: "gres:nic:1, gres:gpu:2", cpus: 2, mem: 2, found: true},
		{name: "first gpu entry decides", in: "gres:gpu:2,gres:gpu:5", cpus: 2, mem: 2, found: true},
		{name: "largest 32-bit count", in: "gres:gpu:4294967295", cpus: 4294967295, mem: 4294967295, found: true},
		{name: "memory in G", in: "gres:gpu:4G", cpuErr: true, mem: 4096, found: true},
		{name: "memory in lower-case g", in: "gres:gpu:4g", cpuErr: true, mem: 4096, found: true},
		{name: "memory in M", in: "gres:gpu:500M", cpuErr: true, mem: 500, found: true},
		{name: "memory in T", in: "gres:gpu:2T", cpuErr: true, mem: 2 << 20, found: true},
		{name: "largest count in T fits", in: "gres:gpu:4294967295T", cpuErr: true, mem: 4294967295 << 20, found: true},
		{name: "zero", in: "gres:gpu:0", cpuErr: true, memErr: true},
		{name: "zero with unit", in: "gres:gpu:0G", cpuErr: true, memErr: true},
		{name: "negative", in: "gres:gpu:-1", cpuErr: true, memErr: true},
		{name: "not a number", in: "gres:gpu:x", cpuErr: true, memErr: true},
		{name: "unit alone", in: "gres:gpu:G", cpuErr: true, memErr: true},
		{name: "two units", in: "gres:gpu:4GG", cpuErr: true, memErr: true},
		{name: "empty count", in: "gres:gpu:", cpuErr: true, memErr: true},
		{name: "past 32 bits", in: "gres:gpu:4294967296", cpuErr: true, memErr: true},
		{name: "absurd count", in: "gres:gpu:99999999999999999999999", cpuErr: true, memErr: true},
		{name: "bare gpu", in: "gres:gpu", cpuErr: true, memErr: true},
		{name: "bare gpu before a valid entry", in: "gres:gpu,gres:gpu:4", cpuErr: true, memErr: true},
		{name: "four fields", in: "gres:gpu:a:b:4", cpuErr: true, memErr: true},
		{name: "sign", in: "gres:gpu:+4", cpuErr: true, memErr: true},
		{name: "space inside", in: "gres:gpu: 4", cpuErr: true, memErr: true},
	}
	check := func(t *testing.T, what, in string, n uint64, ok bool, err error, want uint64, found, wantErr bool) {
		t.Helper()
		if wantErr {
			if !errors.Is(err, ErrSyntax) || n != 0 || ok {
				t.Errorf("%s(%q) = %d, %v, %v; want 0, false, ErrSyntax", what, in, n, ok, err)
			}
			return
		}
		if err != nil || n != want || ok != found {
			t.Errorf("%s(%q) = %d, %v, %v; want %d, %v, nil", what, in, n, ok, err, want, found)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, ok, err := CPUsPerGPU(c.in)
			check(t, "CPUsPerGPU", c.in, n, ok, err, c.cpus, c.found, c.cpuErr)
			n, ok, err = MemMBPerGPU(c.in)
			check(t, "MemMBPerGPU", c.in, n, ok, err, c.mem, c.found, c.memErr)
		})
	}
}

func TestGPUsPerNodeAndSpreadable(t *testing.T) {
	cases := []struct {
		name    string
		req     Request
		total   uint64
		perNode uint64
		spread  bool
	}{
		{"per-job count with no node count: all on one node, may spread", Request{PerJob: "gres:gpu:16"}, 16, 16, true},
		{"per-job count over two nodes", Request{PerJob: "gres:gpu:16", Nodes: 2}, 16, 8, false},
		{"uneven split rounds up", Request{PerJob: "gres:gpu:5", Nodes: 2}, 5, 3, false},
		{"per-node count wins", Request{PerNode: "gres:gpu:4", Nodes: 3}, 12, 4, false},
		{"per-node count without nodes", Request{PerNode: "gres:gpu:4"}, 4, 4, false},
		{"per-task count is not spreadable", Request{PerTask: "gres:gpu:1", Tasks: 4}, 4, 4, false},
		{"malformed per-node string falls back to the total", Request{PerNode: "gres:gpu:-1", PerJob: "gres:gpu:6", Nodes: 2}, 6, 3, false},
		{"zero per-node count with a per-job count may spread", Request{PerNode: "gres:gpu:0", PerJob: "gres:gpu:6"}, 6, 6, true},
		{"no request", Request{}, 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.req.GPUsPerNode(c.total); got != c.perNode {
				t.Errorf("GPUsPerNode(%d) = %d, want %d", c.total, got, c.perNode)
			}
			if got := c.req.Spreadable(); got != c.spread {
				t.Errorf("Spreadable() = %v, want %v", got, c.spread)
			}
		})
	}
}

func TestTyped(t *testing.T) {
	cases := []struct {
		name string
		req  Request
		want bool
	}{
		{"untyped count", Request{PerJob: "gres:gpu:2"}, false},
		{"untyped tres form", Request{PerNode: "gres/gpu=2"}, false},
		{"bare gpu", Request{PerJob: "gres:gpu"}, false},
		{"typed count", Request{PerJob: "gres:gpu:a100:2"}, true},
		{"type alone", Request{PerNode: "gres/gpu:v100"}, true},
		{"typed tres form", Request{PerTask: "gres/gpu:v100=1"}, true},
		{"type in the second entry", Request{PerSocket: "gres:nic:1,gpu:a100:1"}, true},
		{"other gres with a type", Request{PerJob: "gres:nic:fast:1"}, false},
		{"a type-looking count of another entry", Request{PerJob: "gres:gpu:1,gres:mps:a:1"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.req.Typed(); got != c.want {
				t.Errorf("Typed() = %v, want %v", got, c.want)
			}
		})
	}
}

func FuzzPerGPU(f *testing.F) {
	for _, s := range []string{"gres:gpu:4", "gres/gpu:a100:8G", "gpu:0", "gres:gpu,gres:gpu:2", "gres:gpu:4294967295T", ":::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, mem := range []bool{false, true} {
			n, ok, err := perGPU(s, mem)
			if err != nil && (!errors.Is(err, ErrSyntax) || n != 0 || ok) {
				t.Fatalf("perGPU(%q, %v) = %d, %v, %v", s, mem, n, ok, err)
			}
			if err == nil && ok != (n > 0) {
				t.Fatalf("perGPU(%q, %v) = %d, %v: a found count is positive, an absent one 0", s, mem, n, ok)
			}
			if !mem && n > 1<<32-1 {
				t.Fatalf("perGPU(%q) = %d CPUs, more than 32 bits", s, n)
			}
		}
	})
}

func TestShardsCountsOnlyShardEntries(t *testing.T) {
	for in, want := range map[string]uint64{"gpu:2,shard:8": 8, "gpu:4": 0, "gpu:a100:2,shard:a100:8": 8, "": 0, "shard": 1} {
		if got, err := Shards(in); err != nil || got != want {
			t.Fatalf("Shards(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"gpu:1,shard:99999999999", "shard:a:x", "shard:-1"} {
		if _, err := Shards(in); err == nil {
			t.Fatalf("Shards(%q) took it", in)
		}
	}
}

func TestAsksForGPUShare(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want bool
	}{
		{"mps_count_as_slurm_writes_it_is_a_share", "gres:mps:100", true},
		{"bare_mps_is_a_share", "gres:mps", true},
		{"typed_mps_is_a_share", "gres:mps:a100:50", true},
		{"mps_in_tres_form_is_a_share", "gres/mps=100", true},
		{"mps_as_a_user_types_it_is_a_share", "mps:25", true},
		{"shard_count_is_a_share", "gres:shard:2", true},
		{"typed_shard_is_a_share", "gres:shard:a100:2", true},
		{"share_beside_other_gres_is_a_share", "gres:nic:1, gres:mps:10", true},
		{"unreadable_mps_count_still_counts", "gres:mps:x", true},
		{"zero_mps_is_no_share", "gres:mps:0", false},
		{"empty_is_no_share", "", false},
		{"whole_gpu_is_no_share", "gres:gpu:1", false},
		{"gres_whose_name_ends_in_shard_is_no_share", "gres:myshard:1", false},
		{"gres_whose_name_starts_with_mps_is_no_share", "gres:mpsx:1,gres/mps2=4", false},
		{"gpu_type_named_mps_is_no_share", "gres:gpu:mps:1", false},
		{"gpu_type_containing_shard_is_no_share", "gres/gpu:shardy=1", false},
		{"other_gres_is_no_share", "gres:nic:1,license:mps", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := AsksForGPUShare(c.in); got != c.want {
				t.Fatalf("AsksForGPUShare(%q) = %v; want %v", c.in, got, c.want)
			}
		})
	}
	if a := testing.AllocsPerRun(100, func() { AsksForGPUShare("gres:nic:1,gres:gpu:a100:2,gres:mpsx:4") }); a != 0 {
		t.Fatalf("AsksForGPUShare allocates %v times on a string without a share; the pass asks it of every job", a)
	}
}

// BenchmarkAsksForGPUShare: the pass asks it of every job without GPUs,
// most of which ask for no share (a CPU job's empty string, another gres).
func BenchmarkAsksForGPUShare(b *testing.B) {
	for _, c := range []struct{ name, in string }{
		{"empty", ""}, {"other_gres", "gres:nic:1,gres:gpu:a100:2"}, {"mps", "gres:mps:100"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				AsksForGPUShare(c.in)
			}
		})
	}
}
