package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/profile"
)

// expand builds head + unit×n + tail, at most limit bytes, so a few-byte
// seed (unit 0x91, n = 2^20) stands for a megabyte of nesting and the
// committed corpus stays small.
func expand(head, unit []byte, n uint32, tail []byte, limit int) []byte {
	if len(unit) > 0 {
		n = min(n, uint32(max(0, limit-len(head)-len(tail))/len(unit)))
	} else {
		n = 0
	}
	b := make([]byte, 0, len(head)+len(unit)*int(n)+len(tail))
	b = append(b, head...)
	for i := uint32(0); i < n; i++ {
		b = append(b, unit...)
	}
	b = append(b, tail...)
	return b[:min(len(b), limit)]
}

// frameLimit is the most a frame can be: header, credential and the
// largest body any build accepts, plus slack for what follows.
const frameLimit = HeaderSize + MaxCredLen + MaxBodyBytes + 64

// FuzzDecode feeds arbitrary bytes through everything the controller does
// with a connection's bytes, munge aside: frame, then (as after a good
// credential) payload and validation, at the largest frame size any
// configuration allows. Nothing may panic or overflow the stack, a
// rejection must wrap a sentinel, and no body may exceed the limit.
func FuzzDecode(f *testing.F) {
	for _, s := range frameSeeds(f) {
		f.Add(s.head, s.unit, s.n, s.tail)
	}
	f.Fuzz(func(t *testing.T, head, unit []byte, n uint32, tail []byte) {
		r := bytes.NewReader(expand(head, unit, n, tail, frameLimit))
		for {
			fr, err := ReadFrame(r, MaxBodyBytes)
			if err == io.EOF {
				return
			}
			if err != nil {
				if !isSentinel(err) {
					t.Fatalf("error wraps no sentinel: %v", err)
				}
				return
			}
			if len(fr.Body) > MaxBodyBytes || len(fr.Cred) > MaxCredLen || fr.Type.IsReport() != (fr.Cred != "") {
				t.Fatalf("frame passed the limits: type %v, %d-byte credential, %d-byte body", fr.Type, len(fr.Cred), len(fr.Body))
			}
			decodeAny(t, fr.Type, fr.Body)
		}
	})
}

// FuzzUnmarshal feeds arbitrary msgpack, up to the largest body, to every
// message type's decoder. Check must refuse what is too deep or too big
// before the codec runs; every failure must wrap ErrBody.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range bodySeeds(f) {
		f.Add(s.head, s.unit, s.n, s.tail)
	}
	f.Fuzz(func(t *testing.T, head, unit []byte, n uint32, tail []byte) {
		b := expand(head, unit, n, tail, MaxBodyBytes+64)
		checkErr := Check(b, DefaultLimits)
		for _, typ := range []Type{TypeProfile, TypeTelemetry, TypeAck, TypeJobEnd} {
			err := decodeAny(t, typ, b)
			if checkErr != nil && err == nil {
				t.Fatalf("%v decoded a body Check refused: %v", typ, checkErr)
			}
		}
		var v any
		if err := Unmarshal(b, &v); err != nil && !errors.Is(err, ErrBody) {
			t.Fatalf("any: %v", err)
		}
	})
}

// FuzzReadAck is the agent's side: whatever answers on the controller's
// port, reading an ack must end in an ack or a sentinel error.
func FuzzReadAck(f *testing.F) {
	for _, s := range frameSeeds(f) {
		f.Add(s.head, s.unit, s.n, s.tail)
	}
	f.Fuzz(func(t *testing.T, head, unit []byte, n uint32, tail []byte) {
		_, err := ReadAck(bytes.NewReader(expand(head, unit, n, tail, HeaderSize+MaxAckBytes+64)), 64<<20)
		if err != nil && !isSentinel(err) && err != io.EOF {
			t.Fatalf("error wraps no sentinel: %v", err)
		}
	})
}

// decodeAny decodes body as a message of type typ and validates it.
func decodeAny(t *testing.T, typ Type, body []byte) error {
	var err error
	switch typ {
	case TypeAck:
		var a Ack
		err = Unmarshal(body, &a)
	case TypeProfile:
		var p ProfileReport
		if err = Unmarshal(body, &p); err == nil {
			err = p.Validate()
		}
	case TypeTelemetry:
		var tr TelemetryReport
		if err = Unmarshal(body, &tr); err == nil {
			err = tr.Validate()
		}
	case TypeJobEnd:
		var je JobEndReport
		if err = Unmarshal(body, &je); err == nil {
			err = je.Validate()
		}
	}
	if err != nil && !errors.Is(err, ErrBody) {
		t.Fatalf("%v payload error is not ErrBody: %v", typ, err)
	}
	return err
}

func isSentinel(err error) bool {
	for _, s := range []error{ErrBadMagic, ErrVersion, ErrType, ErrCredLength, ErrTooLarge, ErrTruncated, ErrBody} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// seed is one fuzz input: head + unit×n + tail.
type seed struct {
	head, unit []byte
	n          uint32
	tail       []byte
}

func whole(b []byte) seed { return seed{head: b} }

// bodySeeds are valid messages plus the attacks of issue 9, the big ones
// as a unit and a count.
func bodySeeds(tb testing.TB) []seed {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	var out []seed
	for _, p := range []any{
		&ProfileReport{Record: profile.Record{ID: "n1-1", Model: "bert", Node: "n1", User: "u",
			GPUs: 1, Started: at, Finished: at.Add(time.Second), Signal: "regex",
			CPUSweep: []profile.Measurement{{CPUs: 2, Throughput: 3, Samples: 4, Seconds: 5}}}},
		&TelemetryReport{Node: "n1", At: at, GPUs: []GPU{{Index: 0, UUID: "GPU-1", Name: "H100", UtilPct: 50}}},
		&Ack{ID: "n1-1", OK: true},
		&JobEndReport{Node: "n1", JobID: 42, End: at.Unix()},
	} {
		b, err := Marshal(p)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, whole(b))
	}
	unknownKey := []byte{0x81, 0xa2, 'z', 'z'}
	return append(out,
		seed{unknownKey, []byte{0x91}, 1 << 20, []byte{0xc0}},                      // nested a million deep
		seed{unknownKey, []byte{0x91}, MaxBodyBytes, []byte{0xc0}},                 // nested to the largest body
		seed{[]byte{0xdd, 0, 0x10, 0, 0}, []byte{0xc0}, 1 << 20, nil},              // a million nils
		seed{[]byte{0xdf, 0, 0x08, 0, 0}, []byte{0xc0, 0x80}, 1 << 19, nil},        // half a million empty maps
		seed{[]byte{0xc6, 0, 0x3f, 0xff, 0xf0}, []byte{0}, MaxBodyBytes - 16, nil}, // a body-sized bin
		whole([]byte{0xdf, 0xff, 0xff, 0xff, 0xff}),                                // a map claiming 2^32-1 entries
		whole([]byte{0xdd, 0xff, 0xff, 0xff, 0xff}),
		whole([]byte{0xdb, 0xff, 0xff, 0xff, 0xff}),
	)
}

// frameSeeds wrap bodySeeds in frames, plus header attacks.
func frameSeeds(tb testing.TB) []seed {
	var out []seed
	for _, s := range bodySeeds(tb) {
		n := len(s.head) + len(s.unit)*int(s.n) + len(s.tail)
		for _, typ := range []Type{TypeProfile, TypeAck, TypeJobEnd} {
			cred := ""
			if typ.IsReport() {
				cred = "MUNGE:cred"
			}
			h := append(AppendHeader(nil, typ, len(cred), n), cred...)
			out = append(out, seed{append(h, s.head...), s.unit, s.n, s.tail})
		}
	}
	return append(out,
		whole(AppendHeader(nil, TypeProfile, 1, 1<<30)),
		whole(AppendHeader(nil, TypeProfile, 0xffff, 0)),
		whole(header(Magic, 1, 1, 0, 0)),
		whole([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")),
		seed{AppendHeader(nil, TypeTelemetry, MaxCredLen, 0), []byte{'M'}, MaxCredLen, nil}, // the longest credential
	)
}
