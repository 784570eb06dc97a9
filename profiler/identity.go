package profiler

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// newID is a random (version 4) UUID: unique without coordination between
// nodes, which is what makes a record's delivery idempotent.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// userName is the name of the user the workload runs as: cred's, or this
// process's. An unknown uid is written as a number.
func userName(cred *syscall.Credential) string {
	uid := os.Getuid()
	if cred != nil {
		uid = int(cred.Uid)
	}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}
