package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/profile"
)

// fuzzMax keeps the fuzzer's frames small; the limit's value does not change
// the code paths.
const fuzzMax = 64 << 10

// FuzzDecode feeds arbitrary bytes through everything the controller does
// with a connection's bytes before munge sees them: frame, envelope,
// payload, validation. Nothing may panic, a rejection must wrap a sentinel,
// and no frame may exceed the limit.
func FuzzDecode(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			fr, err := ReadFrame(r, fuzzMax)
			if err == io.EOF {
				return
			}
			if err != nil {
				if !isSentinel(err) {
					t.Fatalf("error wraps no sentinel: %v", err)
				}
				return
			}
			if len(fr.Body) > fuzzMax {
				t.Fatalf("body of %d bytes passed a %d-byte limit", len(fr.Body), fuzzMax)
			}
			decodeAny(t, fr)
		}
	})
}

func decodeAny(t *testing.T, fr Frame) {
	switch fr.Type {
	case TypeAck:
		var a Ack
		if err := Unmarshal(fr.Body, &a); err != nil && !errors.Is(err, ErrBody) {
			t.Fatalf("ack: %v", err)
		}
		return
	}
	env, err := DecodeReport(fr)
	if err != nil {
		if !isSentinel(err) {
			t.Fatalf("envelope error wraps no sentinel: %v", err)
		}
		return
	}
	var verr error
	switch fr.Type {
	case TypeProfile:
		var p ProfileReport
		if verr = Unmarshal(env.Body, &p); verr == nil {
			verr = p.Validate()
		}
	case TypeTelemetry:
		var tr TelemetryReport
		if verr = Unmarshal(env.Body, &tr); verr == nil {
			verr = tr.Validate()
		}
	}
	if verr != nil && !errors.Is(verr, ErrBody) {
		t.Fatalf("payload error is not ErrBody: %v", verr)
	}
}

func isSentinel(err error) bool {
	for _, s := range []error{ErrBadMagic, ErrVersion, ErrType, ErrReserved, ErrTooLarge, ErrTruncated, ErrBody} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// fuzzSeeds are valid frames of every type plus a few classic attacks; the
// committed corpus in testdata/fuzz/FuzzDecode grows from these.
func fuzzSeeds(tb testing.TB) [][]byte {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	prof := &ProfileReport{Record: profile.Record{ID: "n1-1", Model: "bert", Node: "n1", User: "u",
		GPUs: 1, Started: at, Finished: at.Add(time.Second), Signal: "regex",
		CPUSweep: []profile.Measurement{{CPUs: 2, Throughput: 3, Samples: 4, Seconds: 5}}}}
	tel := &TelemetryReport{Node: "n1", At: at, GPUs: []GPU{{Index: 0, UUID: "GPU-1", Name: "H100", UtilPct: 50}}}
	var seeds [][]byte
	for _, r := range []struct {
		t Type
		p any
	}{{TypeProfile, prof}, {TypeTelemetry, tel}} {
		b, err := EncodeReport(fakeSigner{}, r.t, r.p)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	var ack bytes.Buffer
	if err := WriteAck(&ack, Ack{ID: "n1-1", OK: true}); err != nil {
		tb.Fatal(err)
	}
	seeds = append(seeds,
		ack.Bytes(),
		header(Magic, Version, 1, 0, 1<<30),
		header(Magic, 2, 1, 0, 0),
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		append(header(Magic, Version, 1, 0, 5), 0xdd, 0xff, 0xff, 0xff, 0xff),
	)
	return seeds
}
