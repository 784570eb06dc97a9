package sqlitedb

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const testSchema = `CREATE TABLE IF NOT EXISTS t (x INTEGER);`

// otherProcess runs the sqlite3 command-line tool on the file, as an admin
// would: read-write unless args say -readonly; it returns its output.
func otherProcess(t *testing.T, path string, args ...string) string {
	t.Helper()
	args = append(args, path, `SELECT count(*) FROM t`)
	out, err := exec.Command("sqlite3", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("sqlite3 %v: %v: %s (sqlite3 is installed by scripts/install-deps.sh)", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Two stores on one file in one process (slurmctld's ledger and profile
// tables), then another process opening and closing the file read-write:
// the first store's later writes must reach the file (the README once
// showed such a sqlite3 command). Opening the second
// store used to open and close the path (Secure), dropping the first
// connection's POSIX locks; the other process then thought itself the last
// user, checkpointed and deleted the WAL still being written, and the
// later row never reached the file (issue 26 item 1).
func TestSecondStoreKeepsFirstConnectionsLocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lachesis.db")
	first, err := Open(path, Normal, 0o700, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := first.Exec(`INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	second, err := Open(path, Normal, 0o700, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()

	otherProcess(t, path)
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Errorf("another process deleted the WAL this process is using: %v", err)
	}
	if _, err := first.Exec(`INSERT INTO t VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	if _, err := second.Exec(`INSERT INTO t VALUES (3)`); err != nil {
		t.Fatal(err)
	}
	if got := otherProcess(t, path, "-readonly"); got != "3" {
		t.Fatalf("a new reader sees %s rows, want 3: writes were lost", got)
	}
}

// A -wal or -shm name planted as a symbolic or hard link to another file:
// opening refuses it and leaves the other file's mode as it was (Secure
// used to chmod, and as root chown, whatever the link named).
func TestSecureRefusesPlantedLinks(t *testing.T) {
	for _, tc := range []struct{ name, suffix, kind, want string }{
		{"wal symlink", "-wal", "symlink", "symbolic link"},
		{"shm symlink", "-shm", "symlink", "symbolic link"},
		{"wal hard link", "-wal", "hardlink", "hard links"},
		{"main symlink", "", "symlink", "symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "lachesis.db")
			if tc.suffix != "" {
				db, err := Open(path, Normal, 0o700, testSchema)
				if err != nil {
					t.Fatal(err)
				}
				db.Close()
			}
			victim := filepath.Join(dir, "victim")
			if err := os.WriteFile(victim, []byte("not yours"), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Remove(path + tc.suffix)
			link := os.Symlink
			if tc.kind == "hardlink" {
				link = os.Link
			}
			if err := link(victim, path+tc.suffix); err != nil {
				t.Fatal(err)
			}
			_, err := Open(path, Normal, 0o700, testSchema)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open with a planted %s%s: err = %v, want it refused (%q)", tc.kind, tc.suffix, err, tc.want)
			}
			fi, err := os.Stat(victim)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o644 {
				t.Errorf("the link's target became %v: Secure followed the link", fi.Mode().Perm())
			}
			if b, _ := os.ReadFile(victim); string(b) != "not yours" {
				t.Errorf("the link's target was written: %q", b)
			}
		})
	}
}

// Files an earlier version left 0644 are tightened when first opened.
func TestSecureTightensExistingFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lachesis.db")
	db, err := Open(path, Normal, 0o700, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db.Close() // the last connection's close deletes -wal and -shm; plant old ones
	for _, p := range []string{path + "-wal", path + "-shm"} {
		os.WriteFile(p, nil, 0o644)
		os.Chmod(p, 0o644)
	}
	db, err = Open(path, Normal, 0o700, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != FileMode {
			t.Errorf("%s mode = %v, want %v", p, fi.Mode().Perm(), FileMode)
		}
	}
}
