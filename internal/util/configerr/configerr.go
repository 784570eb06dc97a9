// Package configerr is the one error type of config validation: a problem
// with one key of one section (tiresias, synergy, placement, fairshare,
// GPU types). Each section's package keeps its own ErrInvalidConfig, which
// its KeyErrors wrap, so errors.Is still tells which section refused.
// It imports nothing, so pure packages such as priority may use it.
package configerr

import "fmt"

// KeyError is one problem with one config key.
type KeyError struct {
	Key     string // the YAML key, relative to its section
	Msg     string
	Section error // the section's ErrInvalidConfig
}

// New is the KeyError for key, its message formatted as fmt.Sprintf does.
func New(section error, key, format string, args ...any) *KeyError {
	return &KeyError{Key: key, Msg: fmt.Sprintf(format, args...), Section: section}
}

func (e *KeyError) Error() string { return e.Key + ": " + e.Msg }

// Unwrap makes errors.Is(err, section's ErrInvalidConfig) hold.
func (e *KeyError) Unwrap() error { return e.Section }
