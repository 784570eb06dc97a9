package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/sim"
)

func smallComparison(t *testing.T) []*sim.Result {
	t.Helper()
	tr := phillySlice(t, 300)
	base := sim.DefaultConfig()
	base.Shape.Nodes = 4
	results, err := sim.RunAll(tr, sim.Variants(base, []string{sim.PolicyFIFO, sim.PolicyLAS}, []sim.AllocMode{sim.AllocProportional}), 2)
	if err != nil {
		t.Fatal(err)
	}
	return results
}

func TestWriteOutputs_WritesReadableFiles(t *testing.T) {
	results := smallComparison(t)
	dir := t.TempDir()
	paths, err := WriteOutputs(dir, results, 1, "test chart", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 5 {
		t.Fatalf("wrote %v", paths)
	}

	f, _ := os.Open(filepath.Join(dir, FileSummaryCSV))
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(rows) != 3 || rows[1][0] != sim.PolicyFIFO || rows[2][0] != sim.PolicyLAS {
		t.Fatalf("summary.csv: %v, %v", rows, err)
	}

	raw, _ := os.ReadFile(filepath.Join(dir, FileSummaryJSON))
	var rep Report
	if err := json.Unmarshal(raw, &rep); err != nil || len(rep.Results) != 2 || rep.Results[1].AvgJCT != results[1].Summary.AvgJCT {
		t.Fatalf("summary.json: %+v, %v", rep, err)
	}

	f, _ = os.Open(filepath.Join(dir, FileCDF))
	img, err := png.Decode(f)
	f.Close()
	if err != nil || img.Bounds().Dx() < 600 {
		t.Fatalf("jct_cdf.png: %v, %v", img.Bounds(), err)
	}

	f, _ = os.Open(filepath.Join(dir, FileJobsCSV))
	rows, err = csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(rows) != 1+2*300 {
		t.Fatalf("jobs.csv: %d rows, %v", len(rows), err)
	}
}

func TestWriteTable_HasOneRowPerResult(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTable(&buf, smallComparison(t)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "avg JCT") || !strings.Contains(lines[2], "las") {
		t.Fatalf("table:\n%s", buf.String())
	}
}

func TestHumanDuration(t *testing.T) {
	cases := map[float64]string{12.34: "12.3s", 200: "3m20s", 5*3600 + 120: "5h02m", 2*86400 + 4*3600: "2d04h"}
	for in, want := range cases {
		if got := HumanDuration(in); got != want {
			t.Errorf("HumanDuration(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestRatios_NameTheHeadlineComparisons(t *testing.T) {
	mk := func(policy string, alloc sim.AllocMode, avg float64) *sim.Result {
		return &sim.Result{Policy: policy, Alloc: alloc, Label: policy + "/" + string(alloc),
			Summary: sim.Summary{Policy: policy, Alloc: alloc, AvgJCT: avg}}
	}
	results := []*sim.Result{
		mk(sim.PolicyFIFO, sim.AllocProportional, 400), mk(sim.PolicySRTF, sim.AllocProportional, 100),
		mk(sim.PolicyLAS, sim.AllocProportional, 200), mk(sim.PolicyGittins, sim.AllocProportional, 110),
		mk(sim.PolicyLAS, sim.AllocSynergy, 150),
	}
	want := map[string]float64{
		"2D-LAS / FIFO (proportional)":            0.5,
		"2D-Gittins / SRTF oracle (proportional)": 1.1,
		"Synergy / proportional (las)":            0.75,
	}
	got := Ratios(results)
	if len(got) != len(want) {
		t.Fatalf("ratios %+v", got)
	}
	for _, r := range got {
		if w, ok := want[r.Name]; !ok || math.Abs(r.Value-w) > 1e-12 {
			t.Errorf("%s = %v, want %v", r.Name, r.Value, w)
		}
	}
}
