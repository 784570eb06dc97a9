package synergy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/lachesis-sched/lachesis/internal/controller/gres"
)

// ErrBadRequest is wrapped by every reason to refuse a job outright.
var ErrBadRequest = errors.New("invalid GPU job request")

// Limits on what is parsed from user-controlled strings.
const (
	maxModelKey    = 128
	maxCommentScan = 4096
)

// Request is the part of a job submission the decision needs, as copied
// out of job_desc_msg_t. Zero values mean "not given".
type Request struct {
	// UserID is the job's owner: their own profile of the model sizes it.
	UserID                   uint32
	Name, Comment, Partition string
	GPU                      gres.Request
	CPUsPerTRES, MemPerTRES  string // the user's --cpus-per-gpu / --mem-per-gpu, raw
	CPUsPerTask              uint16
	MemMB                    uint64 // --mem (per node) or --mem-per-cpu
	MemPerCPU                bool
}

// ModelKey is the job's model: the value of a "model=NAME" token in its
// comment, else its job name. Keys are cut to a sane length.
func (r *Request) ModelKey() string {
	c := r.Comment
	if len(c) > maxCommentScan {
		c = c[:maxCommentScan]
	}
	for _, tok := range strings.FieldsFunc(c, func(r rune) bool {
		return r == ' ' || r == ',' || r == ';' || r == '\t' || r == '\n'
	}) {
		if v, ok := strings.CutPrefix(tok, "model="); ok && v != "" {
			return clip(v)
		}
	}
	return clip(strings.TrimSpace(r.Name))
}

func clip(s string) string {
	if len(s) > maxModelKey {
		return s[:maxModelKey]
	}
	return s
}

// perGPU parses a cpus_per_tres/mem_per_tres string for its gpu entry:
// "gres:gpu:N" (or "gres/gpu:N"), possibly among other entries. ok is false
// when no gpu entry is present.
func perGPU(s, what string) (n uint64, ok bool, err error) {
	if strings.TrimSpace(s) == "" {
		return 0, false, nil
	}
	for _, entry := range strings.Split(s, ",") {
		e := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(entry), "gres:"), "gres/")
		f := strings.Split(e, ":")
		if f[0] != "gpu" {
			continue
		}
		v := f[len(f)-1]
		// Memory may carry a unit suffix (M, G, T); CPUs may not.
		mult := uint64(1)
		if what == "mem" && v != "" {
			switch v[len(v)-1] {
			case 'M', 'm':
				v = v[:len(v)-1]
			case 'G', 'g':
				v, mult = v[:len(v)-1], 1024
			case 'T', 't':
				v, mult = v[:len(v)-1], 1024*1024
			}
		}
		if len(f) < 2 || len(f) > 3 {
			return 0, false, fmt.Errorf("%w: %s-per-gpu %q", ErrBadRequest, what, s)
		}
		x, err := strconv.ParseUint(v, 10, 32)
		if err != nil || x == 0 {
			return 0, false, fmt.Errorf("%w: %s-per-gpu %q is not a positive whole number", ErrBadRequest, what, s)
		}
		return x * mult, true, nil
	}
	return 0, false, nil
}
