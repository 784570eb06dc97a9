package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Magic opens every frame; anything else on the port is not an agent.
var Magic = [4]byte{'L', 'C', 'H', 'S'}

// Version is the only protocol version this build speaks.
const Version uint8 = 1

// HeaderSize is the fixed size of a frame header in bytes.
const HeaderSize = 12

// Type says what a frame's body is.
type Type uint8

// Frame types. Zero is never valid, so a zeroed header is rejected.
const (
	TypeProfile   Type = 1 // Report envelope around a ProfileReport
	TypeTelemetry Type = 2 // Report envelope around a TelemetryReport
	TypeAck       Type = 3 // Ack, controller to agent
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
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Known reports whether t is a frame type of this version.
func (t Type) Known() bool { return t >= TypeProfile && t <= TypeAck }

// Sentinel errors; every decoding error wraps exactly one of them.
var (
	ErrBadMagic  = errors.New("not a lachesis frame (bad magic)")
	ErrVersion   = errors.New("unsupported protocol version")
	ErrType      = errors.New("unknown message type")
	ErrReserved  = errors.New("reserved header bits set")
	ErrTooLarge  = errors.New("frame larger than allowed")
	ErrTruncated = errors.New("frame truncated")
	ErrBody      = errors.New("malformed message body")
)

// Header is a decoded frame header.
type Header struct {
	Version uint8
	Type    Type
	Length  uint32
}

// Frame is one whole frame: its type and raw msgpack body.
type Frame struct {
	Type Type
	Body []byte
}

// ParseHeader validates a raw header against maxBody. It returns the header
// even when it is rejected, so the caller can log what the peer claimed.
func ParseHeader(b [HeaderSize]byte, maxBody int) (Header, error) {
	h := Header{Version: b[4], Type: Type(b[5]), Length: binary.BigEndian.Uint32(b[8:12])}
	switch {
	case [4]byte(b[0:4]) != Magic:
		return h, fmt.Errorf("%w: % x", ErrBadMagic, b[0:4])
	case h.Version != Version:
		return h, fmt.Errorf("%w: %d (this build speaks %d)", ErrVersion, h.Version, Version)
	case !h.Type.Known():
		return h, fmt.Errorf("%w: %d", ErrType, b[5])
	case b[6] != 0 || b[7] != 0:
		return h, fmt.Errorf("%w: %#04x", ErrReserved, binary.BigEndian.Uint16(b[6:8]))
	case maxBody < 0 || uint64(h.Length) > uint64(maxBody):
		return h, fmt.Errorf("%w: body of %d bytes, limit %d", ErrTooLarge, h.Length, maxBody)
	}
	return h, nil
}

// ReadFrame reads one frame from r. The header is validated before the body
// is allocated, so the body costs at most maxBody bytes whatever the peer
// claims. io.EOF is returned as is when r ends cleanly before a frame
// starts; a frame cut short wraps ErrTruncated.
func ReadFrame(r io.Reader, maxBody int) (Frame, error) {
	var raw [HeaderSize]byte
	if n, err := io.ReadFull(r, raw[:]); err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return Frame{}, io.EOF
		}
		return Frame{}, truncated("header", n, HeaderSize, err)
	}
	h, err := ParseHeader(raw, maxBody)
	if err != nil {
		return Frame{Type: h.Type}, err
	}
	body := make([]byte, h.Length)
	if n, err := io.ReadFull(r, body); err != nil {
		return Frame{Type: h.Type}, truncated("body", n, int(h.Length), err)
	}
	return Frame{Type: h.Type, Body: body}, nil
}

// truncated wraps ErrTruncated, keeping a network error (a deadline) visible.
func truncated(part string, got, want int, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %s has %d of %d bytes", ErrTruncated, part, got, want)
	}
	return fmt.Errorf("%w: %s has %d of %d bytes: %w", ErrTruncated, part, got, want, err)
}

// AppendHeader appends the header of a frame of type t with a body of n
// bytes to dst.
func AppendHeader(dst []byte, t Type, n int) []byte {
	dst = append(dst, Magic[:]...)
	dst = append(dst, Version, byte(t), 0, 0)
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

// WriteFrame writes one frame in a single Write call, so concurrent frames
// on one connection never interleave mid-frame.
func WriteFrame(w io.Writer, t Type, body []byte) error {
	if !t.Known() {
		return fmt.Errorf("%w: %d", ErrType, uint8(t))
	}
	if uint64(len(body)) > 0xFFFFFFFF {
		return fmt.Errorf("%w: body of %d bytes", ErrTooLarge, len(body))
	}
	buf := make([]byte, 0, HeaderSize+len(body))
	buf = AppendHeader(buf, t, len(body))
	buf = append(buf, body...)
	_, err := w.Write(buf)
	return err
}
