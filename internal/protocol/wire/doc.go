// Package wire is the protocol between a node agent and the Lachesis core in
// slurmctld: length-framed msgpack (github.com/ugorji/go/codec), versioned,
// with every report carrying a munge credential.
//
// # Frames
//
// A frame is a fixed 12-byte header followed by a msgpack body:
//
//	offset size field
//	0      4    magic "LCHS"
//	4      1    version (Version)
//	5      1    message type (TypeProfile, TypeTelemetry, TypeAck)
//	6      2    reserved, must be zero
//	8      4    body length, big-endian, at most the reader's limit
//
// ReadFrame checks the whole header before it allocates or reads a byte of
// the body, so a peer claiming a 1 GB body costs the reader 12 bytes. Every
// rejection wraps one of the sentinel errors (ErrBadMagic, ErrVersion,
// ErrType, ErrReserved, ErrTooLarge, ErrTruncated, ErrBody) so the server can
// count rejections by reason.
//
// # Reports and acknowledgements
//
// A report frame (TypeProfile or TypeTelemetry) carries a Report envelope:
// the payload's msgpack encoding (Body) and a munge credential (Cred) whose
// payload is Digest(type, Body), the SHA-256 of the frame type followed by
// Body. The credential therefore vouches for exactly one body of one kind;
// munged refuses a credential it has already decoded, so a captured frame
// cannot be replayed either. The controller answers every report it could
// parse with an Ack.
package wire
