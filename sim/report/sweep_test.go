package report

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/sim"
)

func TestWriteSweep_ReferenceRowCSVAndChoice(t *testing.T) {
	tr := phillySlice(t, 120)
	a, b := sim.DefaultConfig(), sim.DefaultConfig()
	a.Shape.Nodes, b.Shape.Nodes = 5, 4
	settings := []sim.SweepSetting{{Name: "40 GPUs", Config: a}, {Name: "32 GPUs", Config: b}}
	rows, err := sim.Sweep(tr, settings, 2)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteSweepMarkdown(&buf, settings, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "| 1 | las | 3 | 3250/7200 | 0 |") || !strings.Contains(buf.String(), "| 1.000 |") {
		t.Fatalf("sweep table lacks the reference row:\n%s", buf.String())
	}
	buf.Reset()
	if err := WriteSweepCSV(&buf, settings, rows); err != nil || strings.Count(buf.String(), "\n") != 2*len(rows)+1 {
		t.Fatalf("sweep csv: %v\n%s", err, buf.String())
	}
	paths, err := WriteSweepOutputs(t.TempDir(), settings, rows)
	if err != nil || len(paths) != 2 {
		t.Fatalf("WriteSweepOutputs: %v, %v", paths, err)
	}
	md, err := os.ReadFile(paths[1])
	if err != nil || !strings.Contains(string(md), "Chosen: ") {
		t.Fatalf("sweep.md lacks the choice: %v", err)
	}
}
