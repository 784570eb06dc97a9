package wire

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/profile"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// nested is a one-key map {"zz": [[[...nil...]]]} nested depth arrays deep
// under a key no message has, the shape the codec skips by recursion.
func nested(depth int) []byte {
	b := []byte{0x81, 0xa2, 'z', 'z'}
	b = append(b, bytes.Repeat([]byte{0x91}, depth)...)
	return append(b, 0xc0)
}

// concat joins byte slices.
func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// manyArrays is a top-level array of k arrays of per nils each.
func manyArrays(k, per int) []byte {
	b := []byte{0xdc, byte(k >> 8), byte(k)}
	for i := 0; i < k; i++ {
		b = append(b, 0xdc, byte(per>>8), byte(per))
		b = append(b, bytes.Repeat([]byte{0xc0}, per)...)
	}
	return b
}

func TestUnmarshalRefusesHostileBodies(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error // besides ErrBody
	}{
		{"a body nested a million deep under an unknown key is too deep", nested(1 << 20), ErrTooDeep},
		{"a body nested to the largest frame is too deep", nested(MaxBodyBytes - 6), ErrTooDeep},
		{"a body nested one level past the limit is too deep", nested(DefaultLimits.MaxDepth), ErrTooDeep},
		{"a map header claiming 2^32-1 entries is too many", []byte{0xdf, 0xff, 0xff, 0xff, 0xff}, ErrTooMany},
		{"an array header claiming 2^32-1 elements is too many", []byte{0xdd, 0xff, 0xff, 0xff, 0xff}, ErrTooMany},
		{"an array one above the length limit is too many", concat([]byte{0xdd, 0, 0, 0x20, 0x01}, bytes.Repeat([]byte{0xc0}, 0x2001)), ErrTooMany},
		{"arrays within the length limit but too many elements in all are too many", manyArrays(20, 8000), ErrTooMany},
		{"a body above MaxBytes is too many", concat([]byte{0xc6, 0, 0x40, 0, 0}, make([]byte, MaxBodyBytes)), ErrTooMany},
		{"a map of a million empty maps is too many", concat([]byte{0xdf, 0, 0x10, 0, 0}, bytes.Repeat([]byte{0x80}, 2<<20)), ErrTooMany},
		{"a string claiming 4 GB is malformed", []byte{0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}, nil},
		{"an array claiming more elements than bytes remain is malformed", []byte{0xdc, 0x01, 0x00, 0xc0}, nil},
		{"the reserved byte 0xc1 is malformed", []byte{0x91, 0xc1}, nil},
		{"trailing bytes after the value are malformed", []byte{0x80, 0x80}, nil},
		{"a value cut short is malformed", []byte{0x92, 0xc0}, nil},
		{"an ext claiming 4 GB is malformed", []byte{0xc9, 0xff, 0xff, 0xff, 0xff, 1}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []any{&ProfileReport{}, &TelemetryReport{}, &Ack{}, new(any)} {
				err := UnmarshalLimited(tc.in, v, Limits{MaxBytes: MaxBodyBytes, MaxDepth: 16, MaxLen: 8192, MaxItems: 1 << 17})
				if !errors.Is(err, ErrBody) || (tc.want != nil && !errors.Is(err, tc.want)) {
					t.Fatalf("%T: got %v, want ErrBody and %v", v, err, tc.want)
				}
			}
		})
	}
}

func TestCheckAcceptsNestingUpToTheLimit(t *testing.T) {
	// nested(d) nests d arrays inside the top-level map: depth d+1.
	if err := Check(nested(DefaultLimits.MaxDepth-1), DefaultLimits); err != nil {
		t.Fatalf("depth %d refused: %v", DefaultLimits.MaxDepth, err)
	}
	var v any
	if err := Unmarshal(nested(DefaultLimits.MaxDepth-1), &v); err != nil {
		t.Fatalf("the codec refused what Check allowed: %v", err)
	}
}

// largestRecord is the biggest profile Validate accepts: a full sweep and
// a 64×64 matrix, with every name at its longest.
func largestRecord() ProfileReport {
	long := string(bytes.Repeat([]byte("n"), MaxNameLen))
	r := profile.Record{ID: string(bytes.Repeat([]byte("i"), MaxIDLen)), Model: long, Node: long, User: long, Signal: long,
		GPUs: 8, Started: time.Unix(1, 0), Finished: time.Unix(2, 0)}
	for i := 0; i < MaxSweepLen; i++ {
		r.CPUSweep = append(r.CPUSweep, profile.Measurement{CPUs: i + 1, Throughput: 1.5, Samples: 3, Seconds: 2.5})
	}
	r.Matrix = sensitivity.Profile{Model: long}
	for i := 0; i < 64; i++ {
		r.Matrix.CPUs = append(r.Matrix.CPUs, i+1)
		r.Matrix.MemGB = append(r.Matrix.MemGB, float64(i+1))
		r.Matrix.Throughput = append(r.Matrix.Throughput, make([]float64, 64))
	}
	return ProfileReport{Record: r}
}

func TestLimitsAcceptEveryValidMessage(t *testing.T) {
	big := largestRecord()
	tel := TelemetryReport{Node: "n", At: time.Unix(3, 0), GPUs: make([]GPU, MaxGPUs)}
	tests := []struct {
		name string
		in   any
		out  any
	}{
		{"the largest valid profile is accepted", &big, &ProfileReport{}},
		{"telemetry of MaxGPUs GPUs is accepted", &tel, &TelemetryReport{}},
		{"an ack is accepted", &Ack{ID: "x", OK: true, Duplicate: true, Error: "e"}, &Ack{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Marshal(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if err := Unmarshal(b, tc.out); err != nil {
				t.Fatalf("%d bytes: %v", len(b), err)
			}
		})
	}
	var got ProfileReport
	b, _ := Marshal(&big)
	if err := Unmarshal(b, &got); err != nil || len(got.Record.CPUSweep) != MaxSweepLen || got.Validate() != nil {
		t.Fatalf("largest record: %v, %d points", err, len(got.Record.CPUSweep))
	}
}

func TestReadAckRefusesHostileReplies(t *testing.T) {
	deep := nested(1 << 15)
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"an ack nested 32 Ki deep is too deep", concat(AppendHeader(nil, TypeAck, 0, len(deep)), deep), ErrTooDeep},
		{"an ack map claiming 2^32-1 entries is too many", concat(AppendHeader(nil, TypeAck, 0, 5), []byte{0xdf, 0xff, 0xff, 0xff, 0xff}), ErrTooMany},
		{"an ack body above MaxAckBytes is too large", AppendHeader(nil, TypeAck, 0, MaxAckBytes+1), ErrTooLarge},
		{"a report where an ack belongs is the wrong type", concat(AppendHeader(nil, TypeProfile, 1, 1), []byte{'c', 0x80}), ErrType},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ReadAck(bytes.NewReader(tc.in), 64<<20); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}
