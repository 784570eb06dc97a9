package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
)

// errNotAdmin: publish was run by someone other than root or SlurmUser.
var errNotAdmin = errors.New("publishing a profile for every user is for root or SlurmUser (the owner of the controller's database)")

// cmdPublish makes one profile of a model size the jobs of every user
// without a profile of their own, and gives the model's speed on its GPU
// type (effective_service). A user's own profile sizes only their jobs;
// publishing is an admin's decision that a profile is sound. slurmctld
// picks the publication up within its flush interval.
func cmdPublish(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("publish", stderr)
	db := dbFlag(fs)
	user := fs.String("user", "", "publish this user's latest profile of MODEL")
	id := fs.String("id", "", "publish the profile with this ID (see `show MODEL`)")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 || (*user == "") == (*id == "") {
		fmt.Fprintln(stderr, "publish needs MODEL and one of --user NAME or --id ID")
		fs.Usage()
		return errUsage
	}
	model := rest[0]
	path, err := dbPath(*db)
	if err != nil {
		return err
	}
	owner, err := mayPublish(path)
	if err != nil {
		return err
	}
	// Opened as its owner would: files SQLite makes beside it (-wal,
	// -shm) go to SlurmUser, whom slurmctld runs as.
	s, err := profilestore.OpenOwned(path, owner)
	if err != nil {
		return err
	}
	defer s.Close()
	if *user != "" {
		rec, ok, err := s.LatestOf(model, *user)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %s has no profile of %q", errNoProfile, *user, model)
		}
		*id = rec.ID
	}
	rec, err := s.Publish(model, *id)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "published profile %s of %s (by %s on %s): jobs of users without a profile of their own get %d CPUs and %.2f GB per GPU\n",
		rec.ID, rec.Model, rec.User, rec.Node, rec.Best.CPUsPerGPU, rec.Best.MemGBPerGPU)
	return nil
}

// mayPublish lets root and the owner of the database file (SlurmUser)
// publish, and returns that owner. The file's mode (0600) keeps everyone
// else out anyway; this says so plainly.
func mayPublish(path string) (owner int, err error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrPermission):
		return 0, fmt.Errorf("%w; you are uid %d: %w", errNotAdmin, os.Geteuid(), err)
	case err != nil:
		return 0, fmt.Errorf("%w (run this on the slurmctld host, or pass --db)", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("%s: cannot tell its owner", path)
	}
	if euid := os.Geteuid(); euid != 0 && uint32(euid) != st.Uid {
		return 0, fmt.Errorf("%w; you are uid %d", errNotAdmin, euid)
	}
	return int(st.Uid), nil
}
