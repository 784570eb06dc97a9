package profiler

import "testing"

func TestContention(t *testing.T) {
	cases := []struct {
		name      string
		k         int
		busy, own int64
		want      float64
	}{
		{"alone on its CPUs", 2, 195, 195, 0},
		{"a neighbour on the CPU it needed took a quarter", 1, 100, 75, 0.25},
		{"a neighbour on a CPU it left idle counts too", 2, 150, 100, 0.25},
		{"saturated CPUs: the neighbour's share counts", 2, 200, 100, 0.5},
		{"tick noise never goes negative", 1, 98, 100, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := contention(c.k, 1, c.busy, c.own); !near(got, c.want) {
				t.Fatalf("contention = %v, want %v", got, c.want)
			}
		})
	}
}

func TestPointResultDisturbed(t *testing.T) {
	cases := []struct {
		name string
		r    pointResult
		want bool
	}{
		{"neighbours on its CPUs while it queued", pointResult{contention: 0.4, waiting: 0.6}, true},
		{"neighbours on a CPU it did not want", pointResult{contention: 0.5, waiting: 0.01}, false},
		{"more threads than CPUs, no neighbours", pointResult{contention: 0.01, waiting: 2}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.r.disturbed(); got != c.want {
				t.Fatalf("disturbed = %v, want %v", got, c.want)
			}
		})
	}
}
