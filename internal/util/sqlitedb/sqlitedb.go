// Package sqlitedb opens Lachesis's SQLite files the one way they are all
// used: WAL, so readers (the CLI, tests) never block the one writer; a busy
// timeout instead of immediate "database is locked" errors; immediate
// transactions, so a writer takes its lock before it reads; one connection,
// since SQLite serialises writers anyway.
package sqlitedb

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	_ "github.com/mattn/go-sqlite3" // the database/sql driver "sqlite3"
)

// Sync is SQLite's synchronous setting in WAL mode.
type Sync string

const (
	// Normal: a crash of the process loses nothing committed; a power cut
	// may lose the last commits.
	Normal Sync = "NORMAL"
	// Full: not even a power cut loses a commit.
	Full Sync = "FULL"
)

// FileMode is the mode of every file Open makes: the ledger, profiles and
// the agent's spool are nobody else's business. SQLite gives the -wal and
// -shm files the mode (and, when run as root, the owner) of the main file,
// so creating the main file first is enough for all three.
const FileMode os.FileMode = 0o600

// NoOwner tells OpenOwned to leave the files' owner alone.
const NoOwner = -1

// Open opens (creating it and its directory, with dirMode, if needed) the
// file at path and applies schema. The file is made FileMode.
func Open(path string, sync Sync, dirMode os.FileMode, schema string) (*sql.DB, error) {
	return OpenOwned(path, sync, dirMode, schema, NoOwner)
}

// OpenOwned is Open, and when the process runs as root and uid is not
// NoOwner, it also hands the files to uid (slurmctld started as root
// still keeps its state as SlurmUser's).
func OpenOwned(path string, sync Sync, dirMode os.FileMode, schema string, uid int) (*sql.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
		return nil, err
	}
	if err := Secure(path, uid); err != nil {
		return nil, err
	}
	dsn := "file:" + path + "?_journal_mode=WAL&_synchronous=" + string(sync) + "&_busy_timeout=5000&_txlock=immediate"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("create schema in %s: %w", path, err)
	}
	return db, nil
}

// Secure creates path if absent and makes it, and its -wal and -shm files
// where they exist, FileMode and (as root, uid not NoOwner) owned by uid.
// Existing files are tightened too: earlier versions left them 0644.
func Secure(path string, uid int) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, FileMode); err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return fmt.Errorf("chmod %s: %w", p, err)
		}
		if uid != NoOwner && os.Geteuid() == 0 {
			if err := os.Chown(p, uid, -1); err != nil {
				return fmt.Errorf("chown %s: %w", p, err)
			}
		}
	}
	return nil
}

// FileID identifies the file a path named when it was taken, so a writer
// can tell that its file was deleted or replaced under it: SQLite keeps
// writing to an unlinked file without complaint.
type FileID struct{ Dev, Ino uint64 }

// IDOf returns the identity of the file at path now.
func IDOf(path string) (FileID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return FileID{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileID{}, fmt.Errorf("stat %s: no inode", path)
	}
	return FileID{Dev: uint64(st.Dev), Ino: st.Ino}, nil //nolint:unconvert // Dev is int32 on some platforms
}

// OpenReadOnly opens an existing file for reading while another process
// writes it.
func OpenReadOnly(path string) (*sql.DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

// ErrReplaced says a file was deleted or replaced while open: SQLite would
// go on writing to the unlinked file, and everything written would vanish
// at the next start.
var ErrReplaced = errors.New("file deleted or replaced while open")

// Handle is a writer's SQLite file that can notice it was deleted or
// replaced and open the new one. Its methods are safe for concurrent use.
type Handle struct {
	path    string
	sync    Sync
	dirMode os.FileMode
	schema  string
	uid     int

	mu sync.RWMutex // guards db and id; Reopen swaps them
	db *sql.DB
	id FileID
}

// OpenHandle opens path as OpenOwned does and remembers which file it is.
func OpenHandle(path string, sync Sync, dirMode os.FileMode, schema string, uid int) (*Handle, error) {
	h := &Handle{path: path, sync: sync, dirMode: dirMode, schema: schema, uid: uid}
	db, id, err := h.open()
	if err != nil {
		return nil, err
	}
	h.db, h.id = db, id
	return h, nil
}

func (h *Handle) open() (*sql.DB, FileID, error) {
	db, err := OpenOwned(h.path, h.sync, h.dirMode, h.schema, h.uid)
	if err != nil {
		return nil, FileID{}, err
	}
	id, err := IDOf(h.path)
	if err != nil {
		db.Close()
		return nil, FileID{}, err
	}
	return db, id, nil
}

// DB is the open database; after a Reopen, the new one.
func (h *Handle) DB() *sql.DB {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.db
}

// CheckFile returns an error wrapping ErrReplaced when the path no longer
// names the file that is open (deleted, or moved away and recreated).
func (h *Handle) CheckFile() error {
	h.mu.RLock()
	want := h.id
	h.mu.RUnlock()
	got, err := IDOf(h.path)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrReplaced, h.path, err)
	}
	if got != want {
		return fmt.Errorf("%w: %s is now another file", ErrReplaced, h.path)
	}
	return nil
}

// Reopen opens (creating if needed) the file the path names now and
// closes the old one. The caller rewrites what the new file lacks.
func (h *Handle) Reopen() error {
	db, id, err := h.open()
	if err != nil {
		return err
	}
	h.mu.Lock()
	old := h.db
	h.db, h.id = db, id
	h.mu.Unlock()
	return old.Close()
}

// Close closes the database.
func (h *Handle) Close() error { return h.DB().Close() }

// ReadOnlyHandle wraps a database opened by OpenReadOnly, for stores that
// serve readers and the writer with one type; CheckFile and Reopen are
// for writers only.
func ReadOnlyHandle(db *sql.DB) *Handle { return &Handle{db: db} }
