//go:build !cgo

package munge

import "fmt"

// Encode fails: libmunge needs cgo.
func Encode(socket string, payload []byte) (string, error) {
	return "", fmt.Errorf("%w: %w", ErrMunge, ErrNoCgo)
}

// Decode fails: libmunge needs cgo.
func Decode(socket, cred string) ([]byte, uint32, uint32, error) {
	return nil, 0, 0, fmt.Errorf("%w: %w", ErrMunge, ErrNoCgo)
}
