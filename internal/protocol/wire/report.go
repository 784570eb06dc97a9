package wire

import (
	"fmt"
	"io"
)

// Signer makes munge credentials (implemented by internal/protocol/munge).
type Signer interface {
	Sign(payload []byte) (cred string, err error)
}

// EncodeReport builds a whole report frame of type t around payload,
// signed by signer: header, credential over Digest(t, body), body.
func EncodeReport(signer Signer, t Type, payload any) ([]byte, error) {
	if !t.IsReport() {
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
	return AppendFrame(nil, t, cred, body)
}

// WriteAck sends an ack frame.
func WriteAck(w io.Writer, a Ack) error {
	body, err := Marshal(&a)
	if err != nil {
		return err
	}
	return WriteFrame(w, TypeAck, "", body)
}

// ackLimits fit an ack (four short fields) and nothing much bigger: the
// agent decodes what the controller's port sends, which need not be the
// controller.
var ackLimits = Limits{MaxBytes: MaxAckBytes, MaxDepth: 2, MaxLen: 16, MaxItems: 64}

// ReadAck reads one frame and requires it to be an ack. The body is
// bounded by min(maxBody, MaxAckBytes) and decoded within ackLimits.
func ReadAck(r io.Reader, maxBody int) (Ack, error) {
	f, err := ReadFrame(r, min(maxBody, MaxAckBytes))
	if err != nil {
		return Ack{}, err
	}
	if f.Type != TypeAck {
		return Ack{}, fmt.Errorf("%w: want an ack, got %v", ErrType, f.Type)
	}
	var a Ack
	if err := UnmarshalLimited(f.Body, &a, ackLimits); err != nil {
		return Ack{}, err
	}
	return a, nil
}
