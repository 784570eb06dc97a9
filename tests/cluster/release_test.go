package cluster_test

import (
	"strconv"
	"strings"
	"testing"
)

// slurmRelease is the major.minor release of the Slurm under test ("22.05",
// "24.11"; set by TestMain). make test runs this suite on both supported
// releases, the other one inside a root of the other Debian release.
var slurmRelease string

// notApplicable ends t as not applicable on the Slurm under test, saying
// why. make test's closing report (scripts/make-test.sh counts) lists it
// as not applicable on that release with the reason, never as passed: the
// line it reads is "NOT APPLICABLE <test> on Slurm <release>: <why>".
func notApplicable(t *testing.T, why string) {
	t.Helper()
	t.Skipf("NOT APPLICABLE %s on Slurm %s: %s", t.Name(), slurmRelease, why)
}

// needsSlurm ends t as not applicable when the Slurm under test is older
// than min ("23.11"): why names what the test needs from min on.
func needsSlurm(t *testing.T, min, why string) {
	t.Helper()
	if releaseBefore(slurmRelease, min) {
		notApplicable(t, "needs Slurm "+min+" or later: "+why)
	}
}

// releaseBefore says whether release a ("22.05") is older than b.
func releaseBefore(a, b string) bool {
	pa, pb := releaseParts(a), releaseParts(b)
	if pa[0] != pb[0] {
		return pa[0] < pb[0]
	}
	return pa[1] < pb[1]
}

func releaseParts(r string) [2]int {
	maj, min, _ := strings.Cut(r, ".")
	a, _ := strconv.Atoi(maj)
	b, _ := strconv.Atoi(min)
	return [2]int{a, b}
}

func TestReleaseBeforeOrdersMajorThenMinor(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"22.05", "24.11", true},
		{"24.11", "22.05", false},
		{"23.02", "23.11", true},
		{"23.11", "23.11", false},
		{"24.11", "25.05", true},
	} {
		if got := releaseBefore(tc.a, tc.b); got != tc.want {
			t.Errorf("releaseBefore(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
