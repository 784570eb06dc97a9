// Package wire is the protocol between a node agent and the Lachesis core in
// slurmctld: length-framed msgpack (github.com/ugorji/go/codec), versioned,
// with every report carrying a munge credential in its frame.
//
// # Frames (version 3)
//
// A frame is a fixed 12-byte header, a credential and a msgpack body:
//
//	offset size field
//	0      4    magic "LCHS"
//	4      1    version (Version, 3)
//	5      1    message type (TypeProfile, TypeTelemetry, TypeAck)
//	6      2    credential length, big-endian: 1 to MaxCredLen for a report, 0 for an ack
//	8      4    body length, big-endian, at most the reader's limit (never above MaxBodyBytes)
//	12     c    credential (munge, ASCII)
//	12+c   n    body (msgpack)
//
// The layout lets the controller authenticate before it decodes anything:
// it reads the fixed header, then at most MaxCredLen bytes of credential,
// has munged verify it, and only for an allowed uid reads the body, checks
// that the credential's payload is Digest(type, body) — the SHA-256 of the
// frame type followed by the body — and decodes it. An unauthenticated peer
// therefore costs the reader 12 + MaxCredLen bytes and one munged call,
// whatever it sends. Every rejection wraps one of the sentinel errors
// (ErrBadMagic, ErrVersion, ErrType, ErrCredLength, ErrTooLarge,
// ErrTruncated, ErrBody) so the server can count rejections by reason.
//
// Version 1 carried the credential inside a msgpack envelope, which had to
// be decoded first. Agent and controller ship together, so version 2 does
// not read version 1: each side refuses the other's frames with ErrVersion,
// and both must be upgraded at the same time. Version 3 frames are laid
// out as version 2's; its profile reports carry their owner's uid.
//
// # Decoding
//
// Every msgpack decode (Unmarshal, ReadAck) first runs Check, an iterative
// scan that bounds nesting depth, each array's and map's length, the total
// element count and the size (Limits). The codec skips unknown fields by
// recursion without a depth limit, so without the scan a body of nested
// one-element arrays under an unknown key costs a stack frame per byte and
// can overflow the goroutine stack, which Go cannot recover from.
//
// # Reports and acknowledgements
//
// Munged refuses a credential it has already decoded, so a captured frame
// cannot be replayed. The controller answers every authenticated report
// with an Ack.
package wire
