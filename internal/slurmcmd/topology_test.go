package slurmcmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseTopology(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      string // "name:list;..."
		bad       bool
	}{
		{"nothing: no topology (topology/none, topology/default)", "", "", false},
		{"tree: the leaves, the root left out (22.05 and 24.11 print alike)",
			"SwitchName=s1 Level=0 LinkSpeed=1 Nodes=lnode[1-2]\nSwitchName=s2 Level=0 LinkSpeed=1 Nodes=lnode[3-4]\n" +
				"SwitchName=top Level=1 LinkSpeed=1 Nodes=lnode[1-4] Switches=s[1-2]\n", "s1:lnode[1-2];s2:lnode[3-4]", false},
		{"tree: a leaf of one node", "SwitchName=a Level=0 LinkSpeed=1 Nodes=n1\n", "a:n1", false},
		{"block: the blocks, aggregates left out",
			"BlockName=b1 BlockIndex=0 Nodes=n[1-4] BlockSize=4\nBlockName=b2 BlockIndex=1 Nodes=n[5-8] BlockSize=4\n" +
				"AggregatedBlock=b[1-2] BlockIndex=2 Nodes=n[1-8] BlockSize=8\n", "b1:n[1-4];b2:n[5-8]", false},
		{"blank lines and spaces around are nothing", "\n  SwitchName=a Level=0 LinkSpeed=1 Nodes=n1  \n\n", "a:n1", false},
		{"a leaf without nodes refused", "SwitchName=a Level=0 LinkSpeed=1\n", "", true},
		{"a leaf with (null) nodes refused", "SwitchName=a Level=0 LinkSpeed=1 Nodes=(null)\n", "", true},
		{"a leaf listed twice refused", "SwitchName=a Level=0 LinkSpeed=1 Nodes=n1\nSwitchName=a Level=0 LinkSpeed=1 Nodes=n2\n", "", true},
		{"a level that is no number refused", "SwitchName=a Level=x LinkSpeed=1 Nodes=n1\n", "", true},
		{"a line of another shape refused", "No topology information available\n", "", true},
		{"an unknown record refused", "Foo=a Level=0 Nodes=n1\n", "", true},
		{"a host list that reads as an option refused", "SwitchName=a Level=0 LinkSpeed=1 Nodes=-h\n", "", true},
		{"control characters refused", "SwitchName=a\x1b[2J Level=0 LinkSpeed=1 Nodes=n1\n", "", true},
		{"a name over the bound refused", "SwitchName=" + strings.Repeat("s", 200) + " Level=0 LinkSpeed=1 Nodes=n1\n", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTopology(tc.out)
			if (err != nil) != tc.bad {
				t.Fatalf("error %v, want bad=%v", err, tc.bad)
			}
			if err != nil && !errors.Is(err, ErrBadTopology) {
				t.Fatalf("error %v does not wrap ErrBadTopology", err)
			}
			var parts []string
			for _, l := range got {
				parts = append(parts, l.name+":"+l.nodes)
			}
			if s := strings.Join(parts, ";"); s != tc.want {
				t.Fatalf("got %q, want %q", s, tc.want)
			}
		})
	}
}

func TestParseTopologyBoundsAHugeAnswer(t *testing.T) {
	var b strings.Builder
	for i := 0; i <= MaxTopologyLeaves; i++ {
		fmt.Fprintf(&b, "SwitchName=s%d Level=0 LinkSpeed=1 Nodes=n%d\n", i, i)
	}
	if _, err := parseTopology(b.String()); !errors.Is(err, ErrBadTopology) {
		t.Fatalf("%d leaves: got %v, want refused", MaxTopologyLeaves+1, err)
	}
	// One huge malformed line: refused, quoted bounded.
	_, err := parseTopology(strings.Repeat("x", 1<<20))
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("a 1 MiB line: error of %d bytes (%v)", len(fmt.Sprint(err)), err)
	}
}

// The verb expands bracketed host lists with Slurm's own hostlist and
// keeps a node listed under two leaves under the first.
func TestTopologyExpandsTheLeavesNodes(t *testing.T) {
	r := standIn(t, "scontrol", `case "$*" in
"show topology") printf 'SwitchName=s1 Level=0 LinkSpeed=1 Nodes=n[1-2]\nSwitchName=s2 Level=0 LinkSpeed=1 Nodes=n2,m1\nSwitchName=top Level=1 LinkSpeed=1 Nodes=n[1-2],m1 Switches=s[1-2]\n';;
"show hostnames n[1-2]") printf 'n1\nn2\n';;
*) echo "asked $*" >&2; exit 1;;
esac`)
	got, err := r.Topology(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(got); s != "[{s1 [n1 n2]} {s2 [m1]}]" {
		t.Fatalf("got %s", s)
	}
}

func TestTopologyWithoutSwitchesIsNone(t *testing.T) {
	r := standIn(t, "scontrol", `echo "No topology information available" >&2; exit 0`)
	got, err := r.Topology(context.Background())
	if err != nil || got != nil {
		t.Fatalf("got %v, %v; want none", got, err)
	}
}

// SLURM_TOPO_LEN in slurmctld's environment would cut the lines short.
func TestTopologyIsReadWhateverSLURM_TOPO_LENSays(t *testing.T) {
	t.Setenv("SLURM_TOPO_LEN", "12")
	r := standIn(t, "scontrol", `[ -z "$SLURM_TOPO_LEN" ] || exit 7; echo 'SwitchName=s1 Level=0 LinkSpeed=1 Nodes=n1'`)
	got, err := r.Topology(context.Background())
	if err != nil || len(got) != 1 {
		t.Fatalf("got %v, %v", got, err)
	}
}
