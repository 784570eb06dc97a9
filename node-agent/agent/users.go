package agent

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// User is what the agent needs to run a workload as someone.
type User struct {
	Name   string
	GID    uint32   // primary group
	Groups []uint32 // supplementary groups
}

// UserLookup resolves a uid.
type UserLookup func(uid uint32) (User, error)

// SystemUsers resolves uids through the system's user database (NSS).
func SystemUsers(uid uint32) (User, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return User{}, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return User{}, fmt.Errorf("primary gid %q: %v", u.Gid, err)
	}
	out := User{Name: u.Username, GID: uint32(gid)}
	ids, err := u.GroupIds()
	if err != nil {
		return User{}, fmt.Errorf("groups of %s: %v", u.Username, err)
	}
	for _, s := range ids {
		g, err := strconv.ParseUint(s, 10, 32)
		if err == nil {
			out.Groups = append(out.Groups, uint32(g))
		}
	}
	return out, nil
}

// canRead reports whether uid (with groups) may read path by its mode
// bits, and search every directory above it. Root's reads need no check.
// ACLs are not consulted: a grant by ACL alone is refused, which errs on
// the safe side.
func canRead(path string, uid uint32, groups []uint32) error {
	if uid == 0 {
		return nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: dataset %s does not exist", ErrBadRequest, path)
		}
		return fmt.Errorf("%w: dataset %s: %v", ErrNoAccess, path, err)
	}
	want := uint32(4) // read
	if fi.IsDir() {
		want |= 1 // and list
	}
	if !allows(fi, uid, groups, want) {
		return fmt.Errorf("%w: uid %d may not read the dataset %s", ErrNoAccess, uid, path)
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		di, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrNoAccess, dir, err)
		}
		if !allows(di, uid, groups, 1) {
			return fmt.Errorf("%w: uid %d may not enter %s", ErrNoAccess, uid, dir)
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}

// allows applies owner, group, other permission bits like the kernel does:
// the first class that matches decides.
func allows(fi os.FileInfo, uid uint32, groups []uint32, want uint32) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	mode := uint32(fi.Mode().Perm())
	switch {
	case st.Uid == uid:
		return (mode>>6)&want == want
	case slices.Contains(groups, st.Gid):
		return (mode>>3)&want == want
	}
	return mode&want == want
}
