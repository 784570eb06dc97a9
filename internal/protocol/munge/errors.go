package munge

import "fmt"

// libmunge's error codes (munge.h, munge_err_t). Kept here rather than
// taken from cgo so the mapping is testable without libmunge.
const (
	codeSocket       = 6
	codeBadCred      = 8
	codeBadVersion   = 9
	codeBadCipher    = 10
	codeBadMAC       = 11
	codeBadZip       = 12
	codeBadRealm     = 13
	codeInvalid      = 14
	codeExpired      = 15
	codeRewound      = 16
	codeReplayed     = 17
	codeUnauthorized = 18
)

// codeError maps a munge error code and message to an error wrapping
// ErrMunge and, where there is one, the matching sentinel.
func codeError(code int, msg string) error {
	var kind error
	switch code {
	case codeSocket:
		kind = ErrSocket
	case codeBadCred, codeBadVersion, codeBadCipher, codeBadMAC, codeBadZip, codeBadRealm, codeInvalid:
		kind = ErrInvalid
	case codeExpired:
		kind = ErrExpired
	case codeRewound:
		kind = ErrRewound
	case codeReplayed:
		kind = ErrReplayed
	case codeUnauthorized:
		kind = ErrUnauthorized
	default:
		return fmt.Errorf("%w: %s (code %d)", ErrMunge, msg, code)
	}
	return fmt.Errorf("%w: %w: %s", ErrMunge, kind, msg)
}
