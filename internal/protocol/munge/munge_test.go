package munge_test

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"

	"github.com/lachesis-sched/lachesis/internal/protocol/munge"
	"github.com/lachesis-sched/lachesis/internal/protocol/munge/mungetest"
)

func TestSocketFromAuthInfo(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty gives the default", "", munge.DefaultSocket},
		{"socket option is taken", "socket=/tmp/m.sock", "/tmp/m.sock"},
		{"socket among options is taken", "cred_expire=5,socket=/a/b,ttl=60", "/a/b"},
		{"socket before options is taken", "socket=/a/b,cred_expire=5", "/a/b"},
		{"options without socket give the default", "cred_expire=5", munge.DefaultSocket},
		{"old format bare path is taken", "/var/run/munge/alt.socket", "/var/run/munge/alt.socket"},
		{"spaces are trimmed", " socket = /a/b , ttl=3", "/a/b"},
		{"empty socket value gives the default", "socket=,ttl=3", munge.DefaultSocket},
		{"similar key is not the socket", "xsocket=/a,ttl=3", munge.DefaultSocket},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := munge.SocketFromAuthInfo(tc.in); got != tc.want {
				t.Fatalf("SocketFromAuthInfo(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestFakeRefusesReplayAndForeignCredentials(t *testing.T) {
	f := &mungetest.Fake{UID: 7, GID: 8}
	cred, _ := f.Sign([]byte("p"))
	c, err := f.Verify(cred)
	if err != nil || c.UID != 7 || c.GID != 8 || string(c.Payload) != "p" {
		t.Fatalf("got %+v, %v", c, err)
	}
	if _, err := f.Verify(cred); !errors.Is(err, munge.ErrReplayed) {
		t.Fatalf("replay: got %v, want ErrReplayed", err)
	}
	if _, err := f.Verify("MUNGE:garbage"); !errors.Is(err, munge.ErrInvalid) {
		t.Fatalf("foreign: got %v, want ErrInvalid", err)
	}
}

// The tests below talk to real munged daemons.
func startMunged(t *testing.T) string {
	t.Helper()
	if why := mungetest.CanStartMunged(); why != "" {
		testenv.Unavailable(t, why)
	}
	base, err := os.MkdirTemp("/tmp", "lachesis-munge-test-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	t.Cleanup(func() { os.RemoveAll(base) })
	return mungetest.StartMunged(t, base)
}

func TestRealMungeRoundTripsPayloadAndUID(t *testing.T) {
	socket := startMunged(t)
	c := &munge.Client{Socket: socket}
	payload := bytes.Repeat([]byte{0, 1, 2, 255}, 8)
	cred, err := c.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Verify(cred)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Payload, payload) || got.UID != uint32(os.Getuid()) || got.GID != uint32(os.Getgid()) {
		t.Fatalf("got %+v", got)
	}
}

func TestRealMungeRefusals(t *testing.T) {
	socket := startMunged(t)
	other := startMunged(t) // another key: its credentials are forgeries here
	c := &munge.Client{Socket: socket}

	replayed, err := c.Sign([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Verify(replayed); err != nil {
		t.Fatal(err)
	}
	foreign, err := munge.Encode(other, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	flipped, err := c.Sign([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	b := []byte(flipped)
	b[len(b)/2] ^= 0x01
	if b[len(b)/2] == ':' { // keep it inside the base64 part
		b[len(b)/2] = 'A'
	}

	tests := []struct {
		name   string
		socket string
		cred   string
		want   error
	}{
		{"replayed credential is refused", socket, replayed, munge.ErrReplayed},
		{"credential of another key is refused", socket, foreign, munge.ErrInvalid},
		{"credential with a flipped byte is refused", socket, string(b), munge.ErrInvalid},
		{"absent credential is refused", socket, "", munge.ErrInvalid},
		{"garbage is refused", socket, "MUNGE:not-a-credential:", munge.ErrInvalid},
		{"missing munged is a socket error", "/nonexistent/munge.socket", foreign, munge.ErrSocket},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := munge.Decode(tc.socket, tc.cred)
			if !errors.Is(err, tc.want) || !errors.Is(err, munge.ErrMunge) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}
