// Package sqlitedb opens Lachesis's SQLite files the one way they are all
// used: WAL, so readers (the CLI, tests) never block the one writer; a busy
// timeout instead of immediate "database is locked" errors; immediate
// transactions, so a writer takes its lock before it reads; one connection,
// since SQLite serialises writers anyway.
package sqlitedb

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

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

// Open opens (creating it and its directory, with dirMode, if needed) the
// file at path and applies schema.
func Open(path string, sync Sync, dirMode os.FileMode, schema string) (*sql.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
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
