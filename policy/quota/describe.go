package quota

import (
	"fmt"
	"strings"
)

// Quotas kept in slurmdbd (quota.source: slurmdbd). Slurm has no field
// for a guaranteed quota (GrpTRES is a cap Slurm enforces: it would forbid
// borrowing), so an account's quota is a marker in its Description, which
// only Slurm's admins and operators may modify (docs/security.md):
//
//	sacctmgr modify account vision set Description="vision lab; lachesis-quota=2 nodes of 8 GPUs"
//
// The text after the marker is Parse's, up to the next ';' or the
// description's end.

// Marker introduces an account's quota in its Description (sacctmgr
// lower-cases descriptions; the marker is matched in any case).
const Marker = "lachesis-quota"

// MaxDescription is how much of a description is searched for the
// marker: Slurm keeps descriptions as MySQL text (up to 64 KiB), far more
// than a quota needs. A marker beyond it is an error, not ignored.
const MaxDescription = 1024

// InDescription is the quota an account's Description holds: found is
// false when it holds no marker. The marker must come once, followed by
// '=' (spaces around it allowed) and a quota text without control
// characters. Errors wrap ErrBadQuota and say what is wrong, not which
// account (the caller names it).
func InDescription(desc string) (spec Spec, found bool, err error) {
	// ASCII case folding only: byte offsets stay those of desc.
	b := []byte(desc)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	lower := string(b)
	at := strings.Index(lower, Marker)
	if at < 0 {
		return Spec{}, false, nil
	}
	if at+len(Marker) > MaxDescription {
		return Spec{}, true, fmt.Errorf("%w: %s must be within the description's first %d bytes, found at byte %d", ErrBadQuota, Marker, MaxDescription, at)
	}
	if n := strings.Count(lower, Marker); n > 1 {
		return Spec{}, true, fmt.Errorf("%w: %s is written %d times, once is allowed", ErrBadQuota, Marker, n)
	}
	rest := strings.TrimLeft(desc[at+len(Marker):], " ")
	if !strings.HasPrefix(rest, "=") {
		return Spec{}, true, fmt.Errorf(`%w: %s must be followed by "=" and the quota, e.g. %s=2 nodes of 8 GPUs`, ErrBadQuota, Marker, Marker)
	}
	text, _, _ := strings.Cut(rest[1:], ";")
	if end := len(desc) - len(rest) + 1 + len(text); end > MaxDescription {
		return Spec{}, true, fmt.Errorf("%w: the quota text runs past the description's first %d bytes (to byte %d)", ErrBadQuota, MaxDescription, end)
	}
	for _, c := range []byte(text) {
		if c < ' ' || c == 0x7f {
			return Spec{}, true, fmt.Errorf("%w: the quota text %.80q holds a control character", ErrBadQuota, text)
		}
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return Spec{}, true, fmt.Errorf("%w: %s= is empty", ErrBadQuota, Marker)
	}
	spec, err = Parse(text)
	return spec, true, err
}

// AccountName is name as Slurm keeps it (lower case) if it can be an
// account holding a quota: 1 to MaxAccountLen bytes, no spaces, commas or
// control characters.
func AccountName(name string) (string, error) {
	acct := strings.ToLower(name)
	ok := acct != "" && len(acct) <= MaxAccountLen
	for i := 0; ok && i < len(acct); i++ {
		ok = acct[i] > ' ' && acct[i] != ',' && acct[i] != 0x7f
	}
	if !ok {
		return "", fmt.Errorf("%w: %.80q is not an account name (1 to %d bytes, no spaces, commas or control characters)", ErrBadQuota, name, MaxAccountLen)
	}
	return acct, nil
}
