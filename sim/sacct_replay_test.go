package sim

import (
	"os"
	"testing"

	"github.com/lachesis-sched/lachesis/sim/trace"
)

func readSacctFile(t *testing.T, path string, fold trace.SacctFold) *Trace {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, _, err := trace.ReadSacct(f, trace.SacctOptions{Fold: fold})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// The replay of the sample runs and every job finishes.
func TestReadSacct_SampleReplays(t *testing.T) {
	tr := readSacctFile(t, "trace/testdata/sacct_sample.txt", trace.FoldLast)
	tr.Name = "sacct sample"
	cfg := DefaultConfig()
	cfg.Shape.Nodes = 2
	cfg.Profiles, cfg.Alloc, cfg.Models, cfg.RecordRuns = profiles(t), AllocSynergy, ModelsAsGiven, true
	checkInvariants(t, tr, cfg, runOK(t, cfg, tr))
}
