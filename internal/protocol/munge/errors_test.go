package munge

import (
	"errors"
	"testing"
)

func TestCodeErrorMapsMungeCodes(t *testing.T) {
	tests := []struct {
		name string
		code int
		want error
	}{
		{"socket error is ErrSocket", codeSocket, ErrSocket},
		{"bad credential is ErrInvalid", codeBadCred, ErrInvalid},
		{"bad MAC is ErrInvalid", codeBadMAC, ErrInvalid},
		{"invalid credential is ErrInvalid", codeInvalid, ErrInvalid},
		{"expired credential is ErrExpired", codeExpired, ErrExpired},
		{"rewound credential is ErrRewound", codeRewound, ErrRewound},
		{"replayed credential is ErrReplayed", codeReplayed, ErrReplayed},
		{"unauthorized decode is ErrUnauthorized", codeUnauthorized, ErrUnauthorized},
		{"other codes are plain ErrMunge", 1, ErrMunge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := codeError(tc.code, "msg")
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrMunge) {
				t.Fatalf("code %d: got %v, want %v", tc.code, err, tc.want)
			}
		})
	}
}
