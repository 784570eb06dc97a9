package mungetest

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"

	"github.com/lachesis-sched/lachesis/internal/protocol/munge"
)

const fakePrefix = "FAKE:"

// Fake signs as a fixed uid/gid and verifies what it (or another Fake)
// signed. Like munged it refuses a credential it has already verified.
type Fake struct {
	UID, GID uint32

	mu    sync.Mutex
	seq   uint64
	seen  map[string]bool
	calls int
}

var (
	_ munge.Signer   = (*Fake)(nil)
	_ munge.Verifier = (*Fake)(nil)
)

// Sign implements munge.Signer.
func (f *Fake) Sign(payload []byte) (string, error) {
	f.mu.Lock()
	f.seq++
	seq := f.seq
	f.mu.Unlock()
	b := binary.BigEndian.AppendUint32(nil, f.UID)
	b = binary.BigEndian.AppendUint32(b, f.GID)
	b = binary.BigEndian.AppendUint64(b, seq)
	b = append(b, payload...)
	return fakePrefix + base64.StdEncoding.EncodeToString(b), nil
}

// Verify implements munge.Verifier.
func (f *Fake) Verify(cred string) (munge.Credential, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	raw, ok := strings.CutPrefix(cred, fakePrefix)
	if !ok {
		return munge.Credential{}, fmt.Errorf("%w: %w: not a fake credential", munge.ErrMunge, munge.ErrInvalid)
	}
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(b) < 16 {
		return munge.Credential{}, fmt.Errorf("%w: %w: bad fake credential", munge.ErrMunge, munge.ErrInvalid)
	}
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	if f.seen[cred] {
		return munge.Credential{}, fmt.Errorf("%w: %w", munge.ErrMunge, munge.ErrReplayed)
	}
	f.seen[cred] = true
	return munge.Credential{
		UID:     binary.BigEndian.Uint32(b[0:4]),
		GID:     binary.BigEndian.Uint32(b[4:8]),
		Payload: append([]byte(nil), b[16:]...),
	}, nil
}

// Calls is how many credentials Verify has been asked about.
func (f *Fake) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}
