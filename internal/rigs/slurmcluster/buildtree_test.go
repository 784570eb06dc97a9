package slurmcluster

import (
	"path/filepath"
	"regexp"
	"testing"
)

// The build tree is LACHESIS_BUILD (relative to the repository unless
// absolute), else build/slurm-<major.minor> of the installed Slurm (or,
// before it is installed, of the one this machine's Debian ships), the
// rule the Makefile follows too.
func TestBuildTreeIsTheOverrideElseThePerReleaseTree(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("LACHESIS_BUILD", "")
	got, err := BuildTree(root)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := SlurmRelease(root)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9]+\.[0-9]{2}$`).MatchString(rel) {
		t.Fatalf("SlurmRelease = %q, want major.minor", rel)
	}
	if want := filepath.Join(root, "build", "slurm-"+rel); got != want {
		t.Errorf("BuildTree = %s, want %s", got, want)
	}
	for _, tc := range []struct{ env, want string }{
		{"build/mine", filepath.Join(root, "build", "mine")},
		{"/srv/lachesis-build/", "/srv/lachesis-build"},
	} {
		t.Setenv("LACHESIS_BUILD", tc.env)
		if got, err := BuildTree(root); err != nil || got != tc.want {
			t.Errorf("LACHESIS_BUILD=%s: BuildTree = %s, %v; want %s", tc.env, got, err, tc.want)
		}
	}
}
