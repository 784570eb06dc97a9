package sharing

import (
	"errors"
	"math"
	"strings"
	"testing"
)

const soloCSV = "gpu_type,placement,model,batch_size,num_gpus,throughput\n" +
	"v100,consolidated,A,0,1,10\n" +
	"v100,consolidated,B,32,1,4\n" +
	"v100,consolidated,Z,0,1,0\n" +
	"k80,consolidated,A,0,1,1\n"

func TestPairTableReads(t *testing.T) {
	col := "gpu_type,model_a,batch_size_a,model_b,batch_size_b,throughput_a,throughput_b\n" +
		"v100,A,0,B,32,9.8,2\n" +
		"v100,Z,0,A,0,1,1\n" + // Z did not run alone: no fraction
		"k80,A,0,B,32,0.1,0.1\n"
	tab, err := ReadGavel(strings.NewReader(soloCSV), strings.NewReader(col), "v100", DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if tab.Len() != 1 {
		t.Fatalf("pairs = %d, want 1 (the Z pair has no solo figure, k80 is another type)", tab.Len())
	}
	s, _, ok := tab.Lookup("B/bs32", "A")
	if !ok || s.Of != 0.5 || math.Abs(s.Beside-0.98) > 1e-12 {
		t.Errorf("B/bs32 beside A = %+v %v, want {0.5 0.98}", s, ok)
	}
}

func TestPairTableRefusesHostileRows(t *testing.T) {
	head := "gpu_type,model_a,batch_size_a,model_b,batch_size_b,throughput_a,throughput_b\n"
	for _, tc := range []struct{ name, col string }{
		{"NaN throughput is refused", head + "v100,A,0,B,32,NaN,1\n"},
		{"infinite throughput is refused", head + "v100,A,0,B,32,+Inf,1\n"},
		{"negative throughput is refused", head + "v100,A,0,B,32,-1,1\n"},
		{"a fraction far above 1 is refused", head + "v100,A,0,B,32,100,1\n"},
		{"a non-numeric batch is refused", head + "v100,A,x,B,32,1,1\n"},
		{"a name over the limit is refused", head + "v100," + strings.Repeat("m", 200) + ",0,B,32,1,1\n"},
		{"a name with a control character is refused", head + "v100,\"A\x1b[2J\",0,B,32,1,1\n"},
		{"a missing column is refused", "gpu_type,model_a,batch_size_a\nv100,A,0\n"},
		{"a line without end is refused", head + "v100," + strings.Repeat("x", MaxLine+10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadGavel(strings.NewReader(soloCSV), strings.NewReader(tc.col), "v100", DefaultLimits())
			if !errors.Is(err, ErrBadEntry) {
				t.Fatalf("err = %v, want ErrBadEntry", err)
			}
		})
	}
	t.Run("too many rows are refused", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(head)
		for i := 0; i <= MaxRows; i++ {
			b.WriteString("k80,A,0,B,32,1,1\n")
		}
		_, err := ReadGavel(strings.NewReader(soloCSV), strings.NewReader(b.String()), "v100", DefaultLimits())
		if !errors.Is(err, ErrBadEntry) {
			t.Fatalf("err = %v, want ErrBadEntry", err)
		}
	})
}

func TestPairTableEntries(t *testing.T) {
	t.Run("a measurement overrides a seed and a seed never overrides a measurement", func(t *testing.T) {
		tab := NewTable(Limits{})
		must(t, tab.Seed("a", "b", 0.9, 0.8))
		must(t, tab.Measure("b", "a", 0.7, 0.99))
		must(t, tab.Seed("a", "b", 0.1, 0.1))
		s, measured, _ := tab.Lookup("a", "b")
		if !measured || s.Of != 0.99 || s.Beside != 0.7 {
			t.Errorf("a beside b = %+v measured %v, want the measurement {0.99 0.7}", s, measured)
		}
	})
	t.Run("fractions outside the sane range and NaN are refused", func(t *testing.T) {
		tab := NewTable(Limits{})
		for _, f := range []float64{math.NaN(), -0.1, 1.21, math.Inf(1)} {
			if err := tab.Measure("a", "b", f, 0.5); !errors.Is(err, ErrBadEntry) {
				t.Errorf("fraction %v: err = %v", f, err)
			}
		}
		if tab.Len() != 0 {
			t.Errorf("refused entries were stored: %d", tab.Len())
		}
	})
	t.Run("a full table refuses new pairs and still updates held ones", func(t *testing.T) {
		tab := NewTable(Limits{MaxEntries: 2, MaxName: 8, MaxFraction: 1})
		must(t, tab.Measure("a", "b", 1, 1))
		must(t, tab.Measure("a", "c", 1, 1))
		if err := tab.Measure("a", "d", 1, 1); !errors.Is(err, ErrTableFull) {
			t.Errorf("third pair: err = %v, want ErrTableFull", err)
		}
		must(t, tab.Measure("b", "a", 0.5, 0.5))
		if err := tab.MarkBad("x", "y"); !errors.Is(err, ErrTableFull) {
			t.Errorf("marking a new pair bad in a full table: err = %v", err)
		}
	})
	t.Run("a limit left zero takes the default instead of refusing every name", func(t *testing.T) {
		tab := NewTable(Limits{MaxEntries: 1})
		must(t, tab.Measure("resnet50", "bert", 0.9, 0.8))
		if err := tab.Measure("a", "c", 1, 1); !errors.Is(err, ErrTableFull) {
			t.Errorf("second pair: err = %v, want ErrTableFull", err)
		}
	})
	t.Run("a bad mark outlives a new measurement", func(t *testing.T) {
		tab := NewTable(Limits{})
		must(t, tab.MarkBad("a", "b"))
		must(t, tab.Measure("a", "b", 1, 1))
		if !tab.Bad("b", "a") {
			t.Error("pair forgot it was bad")
		}
	})
	t.Run("a self-pair is symmetric whichever copy is named first", func(t *testing.T) {
		tab := NewTable(Limits{})
		must(t, tab.Measure("a", "a", 0.6, 0.8))
		s, _, _ := tab.Lookup("a", "a")
		if s.Of != s.Beside || math.Abs(s.Of-0.7) > 1e-12 {
			t.Errorf("a beside a = %+v, want both 0.7", s)
		}
		if u, _ := tab.Usage("a"); math.Abs(u-1/1.4) > 1e-12 {
			t.Errorf("usage = %v, want 1/(2·0.7)", u)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A job's model key is what its owner typed, lower-cased by slurmctld's
// core; Gavel's names are mixed case. Both spellings meet one entry, and
// Models keeps the name the entry was stored under.
func TestPairTableMeetsAJobsLowerCaseModelKeyAndGavelsName(t *testing.T) {
	tab := NewTable(DefaultLimits())
	if err := tab.Seed("ResNet-50/bs64", "ResNet-50/bs64", 0.6, 0.6); err != nil {
		t.Fatal(err)
	}
	if err := tab.Seed(GavelName("ResNet-18", 64), GavelName("LM", 80), 0.98, 0.97); err != nil {
		t.Fatal(err)
	}
	s, _, ok := tab.Lookup("lm/bs80", " resnet-18/BS64")
	if !ok || s.Of != 0.97 || s.Beside != 0.98 {
		t.Fatalf("lm/bs80 beside resnet-18/bs64 = %+v %v, want {0.97 0.98} (Gavel's ResNet-18/bs64 and LM/bs80)", s, ok)
	}
	if err := tab.MarkBad("resnet-18/bs64", "lm/bs80"); err != nil || !tab.Bad("ResNet-18/bs64", "LM/bs80") {
		t.Fatalf("a bad mark under the job's spelling is not seen under Gavel's: %v", err)
	}
	if tab.Len() != 2 {
		t.Fatalf("%d pairs, want 2: one entry per pair whatever the case", tab.Len())
	}
	if m := tab.Models(); len(m) != 1 || m[0] != "ResNet-50/bs64" {
		t.Fatalf("Models() = %v, want the stored name [ResNet-50/bs64]", m)
	}
	if ModelKey(" ResNet-50/bs64 ") != "resnet-50/bs64" {
		t.Fatalf("ModelKey = %q", ModelKey(" ResNet-50/bs64 "))
	}
}
