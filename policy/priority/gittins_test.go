package priority

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// TestIndexByHand checks G(a,Δ) = P(S−a ≤ Δ | S>a) / E[min(S−a, Δ) | S>a]
// on S = {1, 2, 3, 4, 10}. Each case shows the working: the samples above a,
// how many of them end within Δ, and the sum of min(s−a, Δ) over them. The
// count of samples above a divides both P and E and cancels.
func TestIndexByHand(t *testing.T) {
	d, err := NewDistribution([]float64{10, 3, 1, 4, 2})
	if err != nil {
		t.Fatal(err)
	}
	inf := math.Inf(1)
	tests := []struct {
		name     string
		attained float64
		delta    float64
		want     float64
	}{
		// S>0 = all 5; Σ(s−0) = 20 → 5/20.
		{"fresh job, unbounded quantum is 1/mean", 0, inf, 0.25},
		// S>0 = all 5; ≤3: {1,2,3} → 3; Σmin(s,3) = 1+2+3+3+3 = 12 → 3/12.
		{"fresh job, quantum 3 is 3/12", 0, 3, 0.25},
		// S>1 = {2,3,4,10} (strict: the sample at 1 is done); ≤1+2: {2,3}
		// → 2; Σmin(s−1,2) = 1+2+2+2 = 7 → 2/7.
		{"attained equal to a sample excludes it", 1, 2, 2.0 / 7},
		// S>2 = {3,4,10}; ≤4: {3,4} → 2; Σmin(s−2,2) = 1+2+2 = 5 → 2/5.
		{"attained 2, quantum 2 is 2/5", 2, 2, 0.4},
		// S>2.5 = {3,4,10}; Σ(s−2.5) = 0.5+1.5+7.5 = 9.5 → 3/9.5.
		{"fractional attained, unbounded quantum is 6/19", 2.5, inf, 6.0 / 19},
		// S>3.5 = {4,10}; Σ(s−3.5) = 0.5+6.5 = 7 → 2/7.
		{"attained 3.5, unbounded quantum is 2/7", 3.5, inf, 2.0 / 7},
		// S>1.5 = {2,3,4,10}; ≤6.5: {2,3,4} → 3; Σmin(s−1.5,5) =
		// 0.5+1.5+2.5+5 = 9.5 → 3/9.5.
		{"attained 1.5, quantum 5 is 6/19", 1.5, 5, 6.0 / 19},
		// S>4 = {10}; 10−4 = 6 > 5 → 0 finish; Σmin = 5 → 0/5.
		{"no sample ends within the quantum gives 0", 4, 5, 0},
		// S>4 = {10}; 10−4 = 6 ≤ 6 → 1; Σmin = 6 → 1/6.
		{"sample ending exactly at a+Δ counts as finished", 4, 6, 1.0 / 6},
		// S>9.5 = {10}; Σ(s−9.5) = 0.5 → 1/0.5.
		{"just below the longest sample is 1/residual", 9.5, inf, 2},
		// S>10 = {} → outlived all history.
		{"attained equal to the max gives 0", 10, inf, 0},
		{"attained beyond the max gives 0", 11, 3, 0},
		{"zero quantum gives 0", 2, 0, 0},
		{"NaN quantum gives 0", 2, math.NaN(), 0},
		{"NaN attained gives 0", math.NaN(), inf, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := d.Index(tc.attained, tc.delta)
			if math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Index(%v, %v) = %.15g, want %.15g", tc.attained, tc.delta, got, tc.want)
			}
		})
	}
}

// TestIndexMatchesDirectSum compares the prefix-sum computation with the
// formula evaluated term by term, on the seed history.
func TestIndexMatchesDirectSum(t *testing.T) {
	d := SeedDistribution()
	for _, a := range []float64{0, 120.5, 121, 3249.9, 3250, 7200, 1e5, 5e7, 53294623.5} {
		for _, delta := range []float64{1, 3250, 7200, 1e6, math.Inf(1)} {
			want := directIndex(d.sorted, a, delta)
			got := d.Index(a, delta)
			if math.Abs(got-want) > 1e-9*math.Abs(want) {
				t.Errorf("Index(%v, %v) = %g, direct sum %g", a, delta, got, want)
			}
		}
	}
}

func directIndex(s []float64, a, delta float64) float64 {
	var done, used float64
	for _, v := range s {
		if v <= a {
			continue
		}
		if v-a <= delta {
			done++
		}
		used += min(v-a, delta)
	}
	if used == 0 {
		return 0
	}
	return done / used
}

func TestIndexStaysFiniteJustBelowASample(t *testing.T) {
	d, err := NewDistribution([]float64{1e9, 1e9 + 1, 3e9})
	if err != nil {
		t.Fatal(err)
	}
	a := math.Nextafter(1e9, 0)
	got := d.Index(a, 10)
	if math.IsInf(got, 0) || math.IsNaN(got) || got <= 0 {
		t.Fatalf("Index(%v, 10) = %v, want a large finite positive index", a, got)
	}
}

func TestIndexDoesNotAllocate(t *testing.T) {
	d := SeedDistribution()
	allocs := testing.AllocsPerRun(100, func() { d.Index(5000, 7200) })
	if allocs != 0 {
		t.Fatalf("Index allocates %v times per call", allocs)
	}
}

func TestNewDistribution(t *testing.T) {
	in := []float64{3, math.NaN(), -1, 0, math.Inf(1), 2, math.Inf(-1)}
	d, err := NewDistribution(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{0, 2, 3}; !slices.Equal(d.sorted, want) {
		t.Errorf("kept %v, want %v", d.sorted, want)
	}
	if want := []float64{0, 0, 2, 5}; !slices.Equal(d.prefix, want) {
		t.Errorf("prefix %v, want %v", d.prefix, want)
	}
	if d.Len() != 3 {
		t.Errorf("Len() = %d, want 3", d.Len())
	}
	in[0] = 100
	if d.sorted[2] != 3 {
		t.Errorf("distribution shares the caller's slice")
	}
	for _, bad := range [][]float64{nil, {}, {math.NaN(), -2}} {
		if _, err := NewDistribution(bad); !errors.Is(err, ErrNoSamples) {
			t.Errorf("NewDistribution(%v) err = %v, want ErrNoSamples", bad, err)
		}
	}
}

func TestSeedDistributionLoads(t *testing.T) {
	if seedErr != nil {
		t.Fatalf("embedded seed_gputime.csv does not parse: %v", seedErr)
	}
	d := SeedDistribution()
	if d == nil {
		t.Fatal("SeedDistribution() = nil")
	}
	if d.Len() != 1001 {
		t.Errorf("Len() = %d, want 1001", d.Len())
	}
	if !slices.IsSorted(d.sorted) {
		t.Error("samples are not sorted")
	}
	if d.sorted[0] != 121 {
		t.Errorf("min = %v, want 121", d.sorted[0])
	}
	if d != SeedDistribution() {
		t.Error("SeedDistribution() parses again on each call")
	}
}

func TestParseDistributionCSV(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		wantLen int
		wantErr bool
	}{
		{"CRLF and blank lines parse", "duration\r\n1\r\n\r\n2\r\n", 2, false},
		{"missing header is an error", "1\n2\n", 0, true},
		{"garbage line is an error", "duration\n1\nx\n", 0, true},
		{"header only is an error", "duration\n", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := parseDistributionCSV(tc.text)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err == nil && d.Len() != tc.wantLen {
				t.Errorf("Len() = %d, want %d", d.Len(), tc.wantLen)
			}
		})
	}
}
