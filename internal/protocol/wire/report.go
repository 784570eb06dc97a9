package wire

import (
	"bytes"
	"fmt"
	"io"
)

// Signer makes munge credentials (implemented by internal/munge).
type Signer interface {
	Sign(payload []byte) (cred string, err error)
}

// EncodeReport builds a whole report frame of type t around payload,
// signed by signer.
func EncodeReport(signer Signer, t Type, payload any) ([]byte, error) {
	if t != TypeProfile && t != TypeTelemetry {
		return nil, fmt.Errorf("%w: %v is not a report", ErrType, t)
	}
	body, err := Marshal(payload)
	if err != nil {
		return nil, err
	}
	cred, err := signer.Sign(Digest(t, body))
	if err != nil {
		return nil, fmt.Errorf("wire: sign %v report: %w", t, err)
	}
	env, err := Marshal(&Report{Cred: cred, Body: body})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := WriteFrame(&buf, t, env); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DecodeReport parses a report frame's envelope.
func DecodeReport(f Frame) (Report, error) {
	if f.Type != TypeProfile && f.Type != TypeTelemetry {
		return Report{}, fmt.Errorf("%w: %v is not a report", ErrType, f.Type)
	}
	var r Report
	if err := Unmarshal(f.Body, &r); err != nil {
		return Report{}, err
	}
	return r, nil
}

// WriteAck sends an ack frame.
func WriteAck(w io.Writer, a Ack) error {
	body, err := Marshal(&a)
	if err != nil {
		return err
	}
	return WriteFrame(w, TypeAck, body)
}

// ReadAck reads one frame and requires it to be an ack.
func ReadAck(r io.Reader, maxBody int) (Ack, error) {
	f, err := ReadFrame(r, maxBody)
	if err != nil {
		return Ack{}, err
	}
	if f.Type != TypeAck {
		return Ack{}, fmt.Errorf("%w: want an ack, got %v", ErrType, f.Type)
	}
	var a Ack
	if err := Unmarshal(f.Body, &a); err != nil {
		return Ack{}, err
	}
	return a, nil
}
