package wire

import (
	"crypto/sha256"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/lachesis-sched/lachesis/profile"
	"github.com/ugorji/go/codec"
)

// ProfileReport delivers one profiling run (frame type TypeProfile).
type ProfileReport struct {
	Record profile.Record `codec:"record"`
}

// TelemetryReport is one sample of a node's GPUs (frame type TypeTelemetry).
type TelemetryReport struct {
	Node string    `codec:"node"`
	GPUs []GPU     `codec:"gpus"`
	At   time.Time `codec:"at"`
}

// GPU is one GPU's state at a telemetry sample.
type GPU struct {
	Index      int     `codec:"index"`
	UUID       string  `codec:"uuid"`
	Name       string  `codec:"name"`
	UtilPct    float64 `codec:"util_pct"`
	MemUsedMB  float64 `codec:"mem_used_mb"`
	MemTotalMB float64 `codec:"mem_total_mb"`
	TempC      float64 `codec:"temp_c"`
	PowerW     float64 `codec:"power_w"`
}

// Ack answers a report. A Duplicate ack means the controller already had
// the record; the agent counts it as delivered. A Final refusal will not
// change however often the report is sent (a quota is full): the agent
// stops retrying it and keeps Error to tell the user why. Agents older
// than Final skip the key and retry as before.
type Ack struct {
	ID        string `codec:"id"`
	OK        bool   `codec:"ok"`
	Duplicate bool   `codec:"dup"`
	Error     string `codec:"error"`
	Final     bool   `codec:"final,omitempty"`
}

// Limits on what a report may carry; longer fields are garbage, not data.
const (
	MaxIDLen    = 128
	MaxNameLen  = 256 // model, node and user names
	MaxSweepLen = 4096
	MaxGPUs     = 1024
	// MaxGPUTypeLen bounds a profile's GPU type (a GRES type or an NVML
	// device name, both short).
	MaxGPUTypeLen = 64
)

// handle is shared and read-only after init: codec handles are safe for
// concurrent use once configured.
var handle = newHandle()

func newHandle() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.WriteExt = true // str8/bin types and the timestamp extension for time.Time
	h.RawToString = true
	// Check enforces DefaultLimits before the codec runs; this is a second
	// line, looser because the codec counts its own levels differently.
	h.MaxDepth = int16(2 * DefaultLimits.MaxDepth)
	h.MaxInitLen = 4096 // a claimed length never preallocates more than this
	return h
}

// Marshal encodes v as msgpack.
func Marshal(v any) ([]byte, error) {
	var b []byte
	if err := codec.NewEncoderBytes(&b, handle).Encode(v); err != nil {
		return nil, fmt.Errorf("wire: encode %T: %w", v, err)
	}
	return b, nil
}

// Unmarshal decodes msgpack b into v after Check has bounded its depth,
// element counts and size by DefaultLimits. Every failure, including a
// panic in the codec on hostile input, wraps ErrBody.
func Unmarshal(b []byte, v any) error { return UnmarshalLimited(b, v, DefaultLimits) }

// UnmarshalLimited is Unmarshal with explicit limits.
func UnmarshalLimited(b []byte, v any, lim Limits) (err error) {
	if err := Check(b, lim); err != nil {
		return fmt.Errorf("%T: %w", v, err)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: decoder panic: %v", ErrBody, r)
		}
	}()
	if err := codec.NewDecoderBytes(b, handle).Decode(v); err != nil {
		return fmt.Errorf("%w: %T: %v", ErrBody, v, err)
	}
	return nil
}

// Digest is what a report's credential must carry: the SHA-256 of the frame
// type followed by the body, so a credential vouches for one body of one
// kind only.
func Digest(t Type, body []byte) []byte {
	h := sha256.New()
	h.Write([]byte{byte(t)})
	h.Write(body)
	return h.Sum(nil)
}

// Validate rejects a profile report no scheduler should act on.
func (p *ProfileReport) Validate() error {
	r := &p.Record
	if err := checkName("record id", r.ID, MaxIDLen); err != nil {
		return err
	}
	if err := checkName("model", r.Model, MaxNameLen); err != nil {
		return err
	}
	if len(r.Node) > MaxNameLen || len(r.User) > MaxNameLen || len(r.Signal) > MaxNameLen {
		return fmt.Errorf("%w: node, user or signal longer than %d bytes", ErrBody, MaxNameLen)
	}
	// "" is an untyped record (an agent older than the field, or a node
	// whose GPUs have no name): accepted, and never compared across types.
	if len(r.GPUType) > MaxGPUTypeLen || !utf8.ValidString(r.GPUType) {
		return fmt.Errorf("%w: gpu_type longer than %d bytes or not UTF-8", ErrBody, MaxGPUTypeLen)
	}
	if len(r.CPUSweep) > MaxSweepLen {
		return fmt.Errorf("%w: sweep of %d points, limit %d", ErrBody, len(r.CPUSweep), MaxSweepLen)
	}
	// NaN or infinite numbers cannot be stored (JSON) and would poison the
	// sizing of every job of the model.
	nums := []float64{r.DiskBW, r.MemBW, r.Tolerance, r.Best.MemGBPerGPU}
	for _, m := range r.CPUSweep {
		nums = append(nums, m.Throughput, m.Seconds)
	}
	nums = append(nums, r.Matrix.MemGB...)
	for _, row := range r.Matrix.Throughput {
		nums = append(nums, row...)
	}
	for _, v := range nums {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: a number of the record is %v", ErrBody, v)
		}
	}
	return nil
}

// Validate rejects a telemetry report that names no node or too many GPUs.
func (t *TelemetryReport) Validate() error {
	if err := checkName("node", t.Node, MaxNameLen); err != nil {
		return err
	}
	if len(t.GPUs) > MaxGPUs {
		return fmt.Errorf("%w: %d GPUs, limit %d", ErrBody, len(t.GPUs), MaxGPUs)
	}
	return nil
}

func checkName(what, s string, limit int) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s", ErrBody, what)
	case len(s) > limit:
		return fmt.Errorf("%w: %s longer than %d bytes", ErrBody, what, limit)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not UTF-8", ErrBody, what)
	}
	return nil
}
