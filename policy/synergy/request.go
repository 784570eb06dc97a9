package synergy

import (
	"errors"
	"strings"

	"github.com/lachesis-sched/lachesis/policy/gres"
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
	// Exclusive: --exclusive (the node for the job alone).
	Exclusive bool
}

// ModelKey is the job's model: the value of a "model=NAME" token in its
// comment, else its job name. Keys are cut to a sane length.
func (r *Request) ModelKey() string {
	for _, tok := range r.commentTokens() {
		if v, ok := strings.CutPrefix(tok, "model="); ok && v != "" {
			return clip(v)
		}
	}
	return clip(strings.TrimSpace(r.Name))
}

// WholeGPUToken in a job's comment keeps its GPUs whole: the job is
// never rewritten into shards (gpushare/shardconvert.go).
const WholeGPUToken = "whole_gpu"

// WantsWholeGPU reports whether the job's comment has WholeGPUToken as
// one of its tokens (separated as model= is).
func (r *Request) WantsWholeGPU() bool {
	for _, tok := range r.commentTokens() {
		if tok == WholeGPUToken {
			return true
		}
	}
	return false
}

// commentTokens splits the first maxCommentScan bytes of the comment at
// spaces, commas, semicolons, tabs and newlines.
func (r *Request) commentTokens() []string {
	c := r.Comment
	if len(c) > maxCommentScan {
		c = c[:maxCommentScan]
	}
	return strings.FieldsFunc(c, func(r rune) bool {
		return r == ' ' || r == ',' || r == ';' || r == '\t' || r == '\n'
	})
}

func clip(s string) string {
	if len(s) > maxModelKey {
		return s[:maxModelKey]
	}
	return s
}
