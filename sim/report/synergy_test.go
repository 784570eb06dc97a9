package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/sim"
)

// A synergy replay's files: the Markdown table with each row's ratios in
// bold, the CSV with JCTs in seconds, and their paths.
func TestWriteSynergyReplayOutputsWritesBothTables(t *testing.T) {
	rows := []sim.SynergyReplayRow{{Rate: 9, Seed: 1, Jobs: 8007, WindowJobs: 1000, Load: 1.17, Policy: "fifo", Reserve: 1,
		ProportionalJCT: 7200, SynergyJCT: 3600, SynergySpeed: 1.25, StartJCT: 2400, StartSpeed: 1.3}}
	shape := sim.Shape{Nodes: 16, GPUsPerNode: 8, CPUsPerNode: 24, MemGBNode: 500}
	dir := t.TempDir()
	paths, err := WriteSynergyReplayOutputs(dir, shape, rows)
	if err != nil || len(paths) != 2 || paths[0] != filepath.Join(dir, FileSummaryMD) || paths[1] != filepath.Join(dir, FileSummaryCSV) {
		t.Fatalf("got %v, %v", paths, err)
	}
	md, _ := os.ReadFile(paths[0])
	if !strings.Contains(string(md), "| 9 | 1 | 8007 | 1.17 | fifo | 1 | 2.0 | 1.0 | **2.00** | 1.25 | 0.7 | **3.00** | 1.30 |") ||
		!strings.Contains(string(md), "average JCT of jobs 4000–4999") {
		t.Fatalf("summary.md:\n%s", md)
	}
	csv, _ := os.ReadFile(paths[1])
	if lines := strings.Split(strings.TrimSpace(string(csv)), "\n"); len(lines) != 2 ||
		lines[1] != "9,1,8007,1.1700,1000,fifo,1,7200.0,3600.0,2.0000,1.2500,2400.0,3.0000,1.3000" {
		t.Fatalf("summary.csv:\n%s", csv)
	}
	var buf bytes.Buffer
	if err := WriteSynergyReplayMarkdown(&buf, shape, rows); err != nil || buf.String() != string(md) {
		t.Fatalf("the table on stdout differs from summary.md: %v", err)
	}
}
