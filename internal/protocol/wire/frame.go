package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Magic opens every frame; anything else on the port is not an agent.
var Magic = [4]byte{'L', 'C', 'H', 'S'}

// Version is the only protocol version this build speaks. Version 2 moved
// the credential out of the msgpack body into the frame, so the controller
// can check it before decoding anything; version 3 adds the owner's uid to
// a profile (profile.Record.UID), which a version 2 agent would leave 0, as
// if root had made every profile. Older peers are refused.
const Version uint8 = 3

// HeaderSize is the fixed size of a frame header in bytes.
const HeaderSize = 12

// MaxCredLen bounds a credential. A munge credential over a 32-byte digest
// is about 200 bytes; anything near this limit is not one.
const MaxCredLen = 1024

// MaxBodyBytes is the largest body any build accepts, whatever its
// configuration says (config caps agent.max_frame_bytes at this value).
const MaxBodyBytes = 4 << 20

// MaxAckBytes bounds an ack body: an ack is a few short fields.
const MaxAckBytes = 64 << 10

// Type says what a frame's body is.
type Type uint8

// Frame types. Zero is never valid, so a zeroed header is rejected.
const (
	TypeProfile   Type = 1 // ProfileReport, agent to controller
	TypeTelemetry Type = 2 // TelemetryReport, agent to controller
	TypeAck       Type = 3 // Ack, controller to agent
	TypeJobEnd    Type = 4 // JobEndReport, agent to controller
	TypeJobUsage  Type = 5 // JobUsageReport, agent to controller
)

// String names the type for logs.
func (t Type) String() string {
	switch t {
	case TypeProfile:
		return "profile"
	case TypeTelemetry:
		return "telemetry"
	case TypeAck:
		return "ack"
	case TypeJobEnd:
		return "job-end"
	case TypeJobUsage:
		return "job-usage"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Known reports whether t is a frame type of this version.
func (t Type) Known() bool { return t >= TypeProfile && t <= TypeJobUsage }

// IsReport reports whether frames of type t carry a credential.
func (t Type) IsReport() bool {
	return t == TypeProfile || t == TypeTelemetry || t == TypeJobEnd || t == TypeJobUsage
}

// Sentinel errors; every decoding error wraps exactly one of the first
// seven, and a body rejected by the limits also wraps ErrTooDeep or
// ErrTooMany.
var (
	ErrBadMagic   = errors.New("not a lachesis frame (bad magic)")
	ErrVersion    = errors.New("unsupported protocol version")
	ErrType       = errors.New("unknown message type")
	ErrCredLength = errors.New("credential length out of range")
	ErrTooLarge   = errors.New("frame larger than allowed")
	ErrTruncated  = errors.New("frame truncated")
	ErrBody       = errors.New("malformed message body")

	ErrTooDeep = errors.New("nested deeper than allowed")
	ErrTooMany = errors.New("more elements than allowed")
)

// Header is a decoded frame header.
type Header struct {
	Version uint8
	Type    Type
	CredLen uint16
	Length  uint32 // of the body
}

// Frame is one whole frame: its type, credential (reports only) and raw
// msgpack body.
type Frame struct {
	Type Type
	Cred string
	Body []byte
}

// ParseHeader validates a raw header against maxBody. It returns the header
// even when it is rejected, so the caller can log what the peer claimed.
func ParseHeader(b [HeaderSize]byte, maxBody int) (Header, error) {
	h := Header{Version: b[4], Type: Type(b[5]), CredLen: binary.BigEndian.Uint16(b[6:8]), Length: binary.BigEndian.Uint32(b[8:12])}
	maxBody = min(maxBody, MaxBodyBytes)
	switch {
	case [4]byte(b[0:4]) != Magic:
		return h, fmt.Errorf("%w: % x", ErrBadMagic, b[0:4])
	case h.Version != Version:
		return h, fmt.Errorf("%w: %d (this build speaks %d; agent and controller must be upgraded together)", ErrVersion, h.Version, Version)
	case !h.Type.Known():
		return h, fmt.Errorf("%w: %d", ErrType, b[5])
	case h.Type.IsReport() && (h.CredLen == 0 || h.CredLen > MaxCredLen):
		return h, fmt.Errorf("%w: %v with a credential of %d bytes, want 1 to %d", ErrCredLength, h.Type, h.CredLen, MaxCredLen)
	case !h.Type.IsReport() && h.CredLen != 0:
		return h, fmt.Errorf("%w: %v with a credential of %d bytes, want none", ErrCredLength, h.Type, h.CredLen)
	case maxBody < 0 || uint64(h.Length) > uint64(maxBody):
		return h, fmt.Errorf("%w: body of %d bytes, limit %d", ErrTooLarge, h.Length, maxBody)
	}
	return h, nil
}

// ReadHeader reads and validates one header. io.EOF is returned as is when
// r ends cleanly before a frame starts.
func ReadHeader(r io.Reader, maxBody int) (Header, error) {
	var raw [HeaderSize]byte
	if n, err := io.ReadFull(r, raw[:]); err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return Header{}, io.EOF
		}
		return Header{}, truncated("header", n, HeaderSize, err)
	}
	return ParseHeader(raw, maxBody)
}

// ReadCred reads the credential that follows header h (at most MaxCredLen
// bytes, checked by ParseHeader).
func ReadCred(r io.Reader, h Header) (string, error) {
	if h.CredLen == 0 {
		return "", nil
	}
	if h.CredLen > MaxCredLen {
		return "", fmt.Errorf("%w: %d bytes", ErrCredLength, h.CredLen)
	}
	b := make([]byte, h.CredLen)
	if n, err := io.ReadFull(r, b); err != nil {
		return "", truncated("credential", n, len(b), err)
	}
	return string(b), nil
}

// ReadBody reads the body that follows header h and its credential. The
// caller has bounded h.Length through ParseHeader.
func ReadBody(r io.Reader, h Header) ([]byte, error) {
	if h.Length > MaxBodyBytes {
		return nil, fmt.Errorf("%w: body of %d bytes", ErrTooLarge, h.Length)
	}
	body := make([]byte, h.Length)
	if n, err := io.ReadFull(r, body); err != nil {
		return nil, truncated("body", n, int(h.Length), err)
	}
	return body, nil
}

// ReadFrame reads one whole frame from r. The header is validated before
// anything else is allocated, so a frame costs at most MaxCredLen+maxBody
// bytes whatever the peer claims. It does not decode the body.
func ReadFrame(r io.Reader, maxBody int) (Frame, error) {
	h, err := ReadHeader(r, maxBody)
	if err != nil {
		return Frame{Type: h.Type}, err
	}
	cred, err := ReadCred(r, h)
	if err != nil {
		return Frame{Type: h.Type}, err
	}
	body, err := ReadBody(r, h)
	if err != nil {
		return Frame{Type: h.Type}, err
	}
	return Frame{Type: h.Type, Cred: cred, Body: body}, nil
}

// truncated wraps ErrTruncated, keeping a network error (a deadline) visible.
func truncated(part string, got, want int, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %s has %d of %d bytes", ErrTruncated, part, got, want)
	}
	return fmt.Errorf("%w: %s has %d of %d bytes: %w", ErrTruncated, part, got, want, err)
}

// AppendHeader appends the header of a frame of type t with a credential
// of credLen bytes and a body of n bytes to dst.
func AppendHeader(dst []byte, t Type, credLen, n int) []byte {
	dst = append(dst, Magic[:]...)
	dst = append(dst, Version, byte(t))
	dst = binary.BigEndian.AppendUint16(dst, uint16(credLen))
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

// AppendFrame appends a whole frame to dst, refusing what ParseHeader
// would refuse on the other side.
func AppendFrame(dst []byte, t Type, cred string, body []byte) ([]byte, error) {
	if !t.Known() {
		return nil, fmt.Errorf("%w: %d", ErrType, uint8(t))
	}
	if t.IsReport() != (cred != "") || len(cred) > MaxCredLen {
		return nil, fmt.Errorf("%w: %v with a credential of %d bytes", ErrCredLength, t, len(cred))
	}
	if len(body) > MaxBodyBytes {
		return nil, fmt.Errorf("%w: body of %d bytes", ErrTooLarge, len(body))
	}
	dst = AppendHeader(dst, t, len(cred), len(body))
	dst = append(dst, cred...)
	return append(dst, body...), nil
}

// WriteFrame writes one frame in a single Write call, so concurrent frames
// on one connection never interleave mid-frame.
func WriteFrame(w io.Writer, t Type, cred string, body []byte) error {
	buf, err := AppendFrame(make([]byte, 0, HeaderSize+len(cred)+len(body)), t, cred, body)
	if err != nil {
		return err
	}
	_, err = w.Write(buf)
	return err
}
