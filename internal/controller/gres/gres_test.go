package gres

import (
	"errors"
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

func FuzzGPUs(f *testing.F) {
	for _, s := range []string{"gres:gpu:2", "gres/gpu:a100=4", "gpu", "gres:nic:1,gres:gpu:1", ":::", "gres:gpu:18446744073709551615"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := GPUs(s)
		if err == nil && n > MaxCount {
			t.Fatalf("GPUs(%q) = %d exceeds MaxCount without an error", s, n)
		}
		if err != nil && !errors.Is(err, ErrSyntax) {
			t.Fatalf("GPUs(%q): error %v does not wrap ErrSyntax", s, err)
		}
	})
}
