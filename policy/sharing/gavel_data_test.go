package sharing

import (
	"os"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/rigs/refdata"
)

// Gavel's own figures seed the table: every V100 pair with a solo figure,
// fractions as computed by hand from the two files.
func TestGavelSeedsEveryV100PairWithFractionsOfSoloThroughput(t *testing.T) {
	solo, err := os.Open(refdata.Path(t, "gavel/throughputs.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer solo.Close()
	col, err := os.Open(refdata.Path(t, "gavel/colocated.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer col.Close()
	tab, err := ReadGavel(solo, col, "v100", DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	// 26 model/batch variants: 26·27/2 unordered pairs.
	if tab.Len() != 351 {
		t.Errorf("V100 pairs = %d, want 351", tab.Len())
	}
	// v100,A3C,0,CycleGAN,0,4.562136,3.163266; solo A3C 7.175767, CycleGAN 4.426088.
	s, measured, ok := tab.Lookup("CycleGAN", "A3C")
	if !ok || measured {
		t.Fatalf("CycleGAN/A3C: ok %v measured %v", ok, measured)
	}
	if d := s.Of - 3.163266/4.426088; d > 1e-12 || d < -1e-12 {
		t.Errorf("CycleGAN beside A3C = %v, want %v", s.Of, 3.163266/4.426088)
	}
	if d := s.Beside - 4.562136/7.175767; d > 1e-12 || d < -1e-12 {
		t.Errorf("A3C beside CycleGAN = %v", s.Beside)
	}
	if u, ok := tab.Usage("ResNet-18/bs32"); !ok || u != 0.5 {
		t.Errorf("ResNet-18/bs32 usage = %v %v, want 0.5 (self-pair at full speed)", u, ok)
	}
	if u, ok := tab.Usage("A3C"); !ok || u < 0.97 || u > 0.99 {
		t.Errorf("A3C usage = %v %v, want 1/(2·0.51)", u, ok)
	}
}
