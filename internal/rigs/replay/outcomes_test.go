package replay

import (
	"os"
	"path/filepath"
	"testing"
)

// Every job of both sides, one line each, under a header; the folder is
// made.
func TestWriteOutcomesCSVListsBothSides(t *testing.T) {
	cs := []Comparison{{Policy: "gittins",
		Cluster:    Side{Label: "slurm", Jobs: []Outcome{{ID: 7, GPUs: 2, Model: "bert", Duration: 60, Submit: 1, FirstStart: 2.5, End: 70, Preemptions: 1}}},
		Simulation: Side{Label: "sim", Jobs: []Outcome{{ID: 7, GPUs: 2, Duration: 60, Submit: 1, FirstStart: 2, End: 62}}}}}
	path := filepath.Join(t.TempDir(), "sub", "jobs.csv")
	if err := WriteOutcomesCSV(path, cs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "policy,side,job,gpus,model,duration_s,submit_s,first_start_s,end_s,jct_s,preemptions\n" +
		"gittins,slurm,7,2,bert,60.000,1.000,2.500,70.000,69.000,1\n" +
		"gittins,sim,7,2,,60.000,1.000,2.000,62.000,61.000,0\n"
	if string(b) != want {
		t.Fatalf("got\n%s\nwant\n%s", b, want)
	}
}
