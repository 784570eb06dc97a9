package agent

import (
	"fmt"
	"os/user"
	"strconv"
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
