package sim

import "testing"

func TestPercentileAndMedian(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if Median(v) != 5.5 || Percentile(v, 95) != 10 || Percentile(v, 50) != 5 || Percentile(v, 10) != 1 {
		t.Fatalf("median %v, p95 %v, p50 %v, p10 %v", Median(v), Percentile(v, 95), Percentile(v, 50), Percentile(v, 10))
	}
}
