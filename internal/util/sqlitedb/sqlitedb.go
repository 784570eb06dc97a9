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
	"io/fs"
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
//
// The files are secured (Secure) only while no descriptor of this process
// holds the database: closing any descriptor of a file drops every POSIX
// lock the process holds on it, SQLite's included. A process whose own
// connection had lost its locks lets another process's sqlite3 believe it
// is the file's last user, checkpoint and delete the WAL the connection
// still writes to: every later write is lost. A second store on a file
// already open here (slurmctld's ledger and profile tables share
// lachesis.db) therefore leaves the files alone; they were secured before
// the first connection opened them, and SQLite gives the -wal and -shm
// files it creates the main file's mode and owner.
func OpenOwned(path string, sync Sync, dirMode os.FileMode, schema string, uid int) (*sql.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
		return nil, err
	}
	openMu.Lock() // from the check until the connection holds its descriptors
	defer openMu.Unlock()
	held, err := heldHere(path)
	if err != nil {
		return nil, err
	}
	if !held {
		if err := Secure(path, uid); err != nil {
			return nil, err
		}
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

// openMu serialises OpenOwned in the process, so one store's Secure never
// runs while another store's first connection opens the same file.
var openMu sync.Mutex

// heldHere reports whether a descriptor of this process has the file at
// path open (false if there is no file). It asks the kernel
// (/proc/self/fd) rather than keeping a tally, so it stays true whoever
// opened the file: a stat of each descriptor's link opens nothing.
func heldHere(path string) (bool, error) {
	id, err := IDOf(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	const fdDir = "/proc/self/fd"
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false, fmt.Errorf("list open files (%s): %w", fdDir, err)
	}
	for _, fd := range fds {
		if got, err := IDOf(filepath.Join(fdDir, fd.Name())); err == nil && got == id {
			return true, nil
		}
	}
	return false, nil
}

// Secure creates path if absent and makes it, and its -wal and -shm files
// where they exist, FileMode and (as root, uid not NoOwner) owned by uid.
// Existing files are tightened too: earlier versions left them 0644.
//
// It works on descriptors opened with O_NOFOLLOW and refuses anything but
// a plain file with one link, so a symbolic or hard link planted under
// one of the three names never makes it chmod or chown another file (and
// SQLite, which would follow the link, never opens it). The caller must
// not hold the database open: closing these descriptors would drop its
// locks (see OpenOwned).
func Secure(path string, uid int) error {
	for i, p := range []string{path, path + "-wal", path + "-shm"} {
		flags := syscall.O_RDWR | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC
		if i == 0 {
			flags |= syscall.O_CREAT
		}
		fd, err := syscall.Open(p, flags, uint32(FileMode))
		if err == syscall.ENOENT && i > 0 {
			continue
		}
		if err == syscall.ELOOP {
			return fmt.Errorf("secure %s: it is a symbolic link; refusing to use it (remove it if you did not make it)", p)
		}
		if err != nil {
			return fmt.Errorf("secure %s: %w", p, err)
		}
		err = secureFD(fd, p, uid)
		syscall.Close(fd)
		if err != nil {
			return err
		}
	}
	return nil
}

func secureFD(fd int, p string, uid int) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fmt.Errorf("secure %s: %w", p, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return fmt.Errorf("secure %s: not a regular file; refusing to use it", p)
	}
	if st.Nlink != 1 {
		return fmt.Errorf("secure %s: it has %d hard links; refusing to use it (remove it if you did not make it)", p, st.Nlink)
	}
	if err := syscall.Fchmod(fd, uint32(FileMode)); err != nil {
		return fmt.Errorf("chmod %s: %w", p, err)
	}
	if uid != NoOwner && os.Geteuid() == 0 {
		if err := syscall.Fchown(fd, uid, -1); err != nil {
			return fmt.Errorf("chown %s: %w", p, err)
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
