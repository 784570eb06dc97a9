package munge

import (
	"errors"
	"strings"
)

// DefaultSocket is munged's socket when AuthInfo names none.
const DefaultSocket = "/run/munge/munge.socket.2"

// Sentinel errors. Every error from this package wraps ErrMunge (and reads
// "munge: ..."), and munged's refusals also wrap the specific one.
var (
	ErrMunge        = errors.New("munge")
	ErrNoCgo        = errors.New("built without cgo, libmunge unavailable")
	ErrSocket       = errors.New("cannot talk to munged")
	ErrInvalid      = errors.New("invalid credential")
	ErrExpired      = errors.New("expired credential")
	ErrRewound      = errors.New("rewound credential (created in the future)")
	ErrReplayed     = errors.New("replayed credential")
	ErrUnauthorized = errors.New("unauthorized credential decode")
)

// Credential is what munged vouches for.
type Credential struct {
	Payload []byte
	UID     uint32
	GID     uint32
}

// Signer makes credentials over a payload.
type Signer interface {
	Sign(payload []byte) (cred string, err error)
}

// Verifier checks a credential and says who made it.
type Verifier interface {
	Verify(cred string) (Credential, error)
}

// Client talks to the munged listening on Socket.
type Client struct {
	Socket string
}

var (
	_ Signer   = (*Client)(nil)
	_ Verifier = (*Client)(nil)
)

// Sign implements Signer.
func (c *Client) Sign(payload []byte) (string, error) { return Encode(c.Socket, payload) }

// Verify implements Verifier.
func (c *Client) Verify(cred string) (Credential, error) {
	p, uid, gid, err := Decode(c.Socket, cred)
	if err != nil {
		return Credential{}, err
	}
	return Credential{Payload: p, UID: uid, GID: gid}, nil
}

// SocketFromAuthInfo returns munged's socket as Slurm reads it from
// slurm.conf's AuthInfo: comma-separated options, the socket given as
// "socket=PATH"; a value without any "=" is the old format, a bare path.
// Without a socket option it returns DefaultSocket.
func SocketFromAuthInfo(authInfo string) string {
	authInfo = strings.TrimSpace(authInfo)
	if authInfo == "" {
		return DefaultSocket
	}
	if !strings.Contains(authInfo, "=") {
		return authInfo
	}
	for _, opt := range strings.Split(authInfo, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(opt), "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "socket") && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
	}
	return DefaultSocket
}
