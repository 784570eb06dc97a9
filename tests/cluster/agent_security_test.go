package cluster_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
)

// TestAgentMeasuresOnlyWhatTheUserCanRead replays issue 9's attack end to
// end, through the CLI and the real agent (root): the test user names
// another user's 0755 home holding a 0700 folder, then a link of its own
// into that folder with a trailing slash.
func TestAgentMeasuresOnlyWhatTheUserCanRead(t *testing.T) {
	e := startAgentCluster(t)
	b, homeB := testenv.User(t, "lachesis-tb")
	private := filepath.Join(homeB, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(path string, size int, mode os.FileMode) {
		if err := os.WriteFile(path, make([]byte, size), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, int(b.Uid), int(b.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(private, "secret.bin"), 3_333_333, 0o644)
	write(filepath.Join(homeB, "public.bin"), 4096, 0o644)
	if err := os.Chown(private, int(b.Uid), int(b.Gid)); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(e.work, "data")
	if err := os.Symlink(private, link); err != nil {
		t.Fatal(err)
	}

	synth := filepath.Join(e.bin, "lachesis-synth")
	profileWith := func(model, dataset string) (string, error) {
		return e.profilerCLI(testUser, "profile", "--agent-socket", e.agentSock, "--model", model,
			"--point-seconds", "2", "--max-cpus", "1", "--dataset", dataset,
			"--", "/bin/sh", "-c", "exec "+synth+" -knee 1 -seconds 0 -data-mb 4")
	}

	out, err := profileWith("peek-link", link+"/")
	if err == nil || !strings.Contains(out, "no access") {
		t.Fatalf("a link into another user's 0700 folder was read: %v\n%s", err, out)
	}
	out, err = profileWith("peek-home", homeB)
	if err != nil {
		t.Fatalf("profile with the other user's home: %v\n%s", err, out)
	}
	s := e.store()
	defer s.Close()
	rec, ok, err := s.Latest("peek-home")
	if err != nil || !ok {
		t.Fatalf("profile not stored: %v\n%s", err, out)
	}
	if rec.DatasetBytes != 4096 {
		t.Fatalf("dataset measured as %d bytes; the user can read 4096", rec.DatasetBytes)
	}
}
