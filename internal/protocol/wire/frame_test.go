package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/profile"
)

const testMax = 1 << 20

func header(magic [4]byte, version uint8, t uint8, credLen uint16, length uint32) []byte {
	b := append([]byte{}, magic[:]...)
	b = append(b, version, t)
	b = binary.BigEndian.AppendUint16(b, credLen)
	return binary.BigEndian.AppendUint32(b, length)
}

func TestReadFrameRejectsBadHeaders(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"bad magic is rejected", header([4]byte{'G', 'E', 'T', ' '}, Version, 1, 1, 0), ErrBadMagic},
		{"unknown version is rejected", header(Magic, 99, 1, 1, 0), ErrVersion},
		{"version 1 (credential inside the body) is rejected", header(Magic, 1, 1, 0, 0), ErrVersion},
		{"version zero is rejected", header(Magic, 0, 1, 1, 0), ErrVersion},
		{"type zero is rejected", header(Magic, Version, 0, 1, 0), ErrType},
		{"unknown type is rejected", header(Magic, Version, 200, 1, 0), ErrType},
		{"report without a credential is rejected", header(Magic, Version, 1, 0, 0), ErrCredLength},
		{"credential one above the limit is rejected", header(Magic, Version, 2, MaxCredLen+1, 0), ErrCredLength},
		{"64 KiB credential is rejected", header(Magic, Version, 1, 0xffff, 0), ErrCredLength},
		{"ack with a credential is rejected", header(Magic, Version, uint8(TypeAck), 1, 0), ErrCredLength},
		{"1 GB length is rejected", header(Magic, Version, 1, 1, 1<<30), ErrTooLarge},
		{"length one above the limit is rejected", header(Magic, Version, 1, 1, testMax+1), ErrTooLarge},
		{"short header is truncated", header(Magic, Version, 1, 1, 0)[:7], ErrTruncated},
		{"short credential is truncated", append(header(Magic, Version, 1, 10, 0), 'M', 'U'), ErrTruncated},
		{"short body is truncated", append(header(Magic, Version, 1, 1, 10), 'c', 1, 2, 3), ErrTruncated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadFrame(bytes.NewReader(tc.in), testMax)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestReadFrameAcceptsValidFrames(t *testing.T) {
	tests := []struct {
		name string
		typ  Type
		cred string
		body []byte
	}{
		{"empty ack body is accepted", TypeAck, "", nil},
		{"body at the limit is accepted", TypeProfile, "c", bytes.Repeat([]byte{7}, testMax)},
		{"credential at the limit is accepted", TypeProfile, string(bytes.Repeat([]byte{'M'}, MaxCredLen)), []byte{0x80}},
		{"telemetry frame is accepted", TypeTelemetry, "MUNGE:x", []byte{0x80}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteFrame(&buf, tc.typ, tc.cred, tc.body); err != nil {
				t.Fatal(err)
			}
			f, err := ReadFrame(&buf, testMax)
			if err != nil {
				t.Fatal(err)
			}
			if f.Type != tc.typ || f.Cred != tc.cred || !bytes.Equal(f.Body, tc.body) {
				t.Fatalf("got type %v, %d-byte credential and %d bytes, want %v, %d and %d", f.Type, len(f.Cred), len(f.Body), tc.typ, len(tc.cred), len(tc.body))
			}
		})
	}
}

func TestReadFrameReturnsEOFAtCleanEnd(t *testing.T) {
	if _, err := ReadFrame(bytes.NewReader(nil), testMax); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
}

// countingReader fails the test if more than limit bytes are read.
type countingReader struct {
	t     *testing.T
	r     io.Reader
	n     int
	limit int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	if c.n > c.limit {
		c.t.Fatalf("read %d bytes, more than the %d-byte header", c.n, c.limit)
	}
	return n, err
}

func TestOneGigabyteClaimCostsOnlyTheHeader(t *testing.T) {
	// The header claims 1 GB and an endless stream follows: the reader must
	// stop after the header and allocate nothing near the claim.
	cr := &countingReader{t: t, r: io.MultiReader(bytes.NewReader(header(Magic, Version, 1, 1, 1<<30)), zeros{}), limit: HeaderSize}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadFrame(cr, testMax)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Fatalf("rejecting a 1 GB claim allocated %d bytes", n)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestWriteFrameRefusesWhatReadFrameWouldRefuse(t *testing.T) {
	tests := []struct {
		name string
		typ  Type
		cred string
		body []byte
		want error
	}{
		{"unknown type is refused", Type(9), "", nil, ErrType},
		{"report without a credential is refused", TypeProfile, "", nil, ErrCredLength},
		{"ack with a credential is refused", TypeAck, "c", nil, ErrCredLength},
		{"overlong credential is refused", TypeTelemetry, string(make([]byte, MaxCredLen+1)), nil, ErrCredLength},
		{"body above MaxBodyBytes is refused", TypeProfile, "c", make([]byte, MaxBodyBytes+1), ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := WriteFrame(io.Discard, tc.typ, tc.cred, tc.body); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// fakeSigner "signs" by prefixing the payload; enough for framing tests.
type fakeSigner struct{ err error }

func (s fakeSigner) Sign(p []byte) (string, error) { return "cred:" + string(p), s.err }

func TestProfileReportRoundTrips(t *testing.T) {
	started := time.Date(2025, 3, 1, 10, 0, 0, 123456789, time.UTC)
	want := ProfileReport{Record: profile.Record{
		ID: "r-1", Model: "resnet50", Node: "lnode1", User: "alice", GPUs: 1,
		Started: started, Finished: started.Add(time.Minute), Signal: "regex",
		CPUSweep: []profile.Measurement{{CPUs: 1, Throughput: 10.5, Samples: 3, Seconds: 2}},
	}}
	raw, err := EncodeReport(fakeSigner{}, TypeProfile, &want)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ReadFrame(bytes.NewReader(raw), testMax)
	if err != nil {
		t.Fatal(err)
	}
	if f.Type != TypeProfile || f.Cred != "cred:"+string(Digest(TypeProfile, f.Body)) {
		t.Fatalf("credential does not carry the digest of the body")
	}
	var got ProfileReport
	if err := Unmarshal(f.Body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Record.ID != want.Record.ID || got.Record.Model != want.Record.Model ||
		!got.Record.Started.Equal(started) || !got.Record.Finished.Equal(want.Record.Finished) ||
		len(got.Record.CPUSweep) != 1 || got.Record.CPUSweep[0] != want.Record.CPUSweep[0] {
		t.Fatalf("round trip changed the record:\n got %+v\nwant %+v", got.Record, want.Record)
	}
	if err := got.Validate(); err != nil {
		t.Fatal(err)
	}
}

// oldRecord is profile.Record as agents sent it before GPU types: the
// same codec names, no gpu_type.
type oldRecord struct {
	ID       string                `codec:"id"`
	Model    string                `codec:"model"`
	Node     string                `codec:"node"`
	User     string                `codec:"user"`
	GPUs     int                   `codec:"gpus"`
	Finished time.Time             `codec:"finished"`
	Signal   string                `codec:"signal"`
	CPUSweep []profile.Measurement `codec:"sweep"`
}

func TestOldAgentsFrameWithoutGPUTypeDecodesAsUntyped(t *testing.T) {
	old := struct {
		Record oldRecord `codec:"record"`
	}{oldRecord{ID: "r-old", Model: "bert", Node: "lnode1", User: "bob", GPUs: 2, Signal: "regex",
		Finished: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		CPUSweep: []profile.Measurement{{CPUs: 2, Throughput: 40}}}}
	raw, err := EncodeReport(fakeSigner{}, TypeProfile, &old)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ReadFrame(bytes.NewReader(raw), testMax)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(f.Body, []byte("gpu_type")) {
		t.Fatal("the old frame carries gpu_type: the test encodes the wrong layout")
	}
	var got ProfileReport
	if err := Unmarshal(f.Body, &got); err != nil {
		t.Fatalf("old frame refused: %v", err)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("old record refused: %v", err)
	}
	r := got.Record
	if r.ID != "r-old" || r.Model != "bert" || r.GPUs != 2 || len(r.CPUSweep) != 1 || r.GPUType != "" {
		t.Fatalf("old frame decoded as %+v, want its fields and an empty GPU type", r)
	}
	if _, ok := r.PerGPUThroughput(); ok {
		t.Fatal("an untyped record offers a per-type throughput")
	}
}

func TestGPUTypeRoundTrips(t *testing.T) {
	want := ProfileReport{Record: profile.Record{ID: "r-2", Model: "bert", GPUs: 2, GPUType: "a100", Signal: "regex",
		CPUSweep: []profile.Measurement{{CPUs: 1, Throughput: 30}, {CPUs: 2, Throughput: 50}}}}
	body, err := Marshal(&want)
	if err != nil {
		t.Fatal(err)
	}
	var got ProfileReport
	if err := Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Record.GPUType != "a100" {
		t.Fatalf("GPU type %q after a round trip, want a100", got.Record.GPUType)
	}
	if tput, ok := got.Record.PerGPUThroughput(); !ok || tput != 25 {
		t.Fatalf("per-GPU throughput %v (%v), want 25: the best point over 2 GPUs", tput, ok)
	}
}

func TestEncodeReportPassesSignerErrorOn(t *testing.T) {
	boom := errors.New("munged down")
	if _, err := EncodeReport(fakeSigner{err: boom}, TypeProfile, &ProfileReport{}); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the signer's error", err)
	}
}

func TestDigestDependsOnTypeAndBody(t *testing.T) {
	a := Digest(TypeProfile, []byte("x"))
	if bytes.Equal(a, Digest(TypeTelemetry, []byte("x"))) || bytes.Equal(a, Digest(TypeProfile, []byte("y"))) {
		t.Fatal("digest ignores the type or the body")
	}
}

func TestAckRoundTrips(t *testing.T) {
	var buf bytes.Buffer
	want := Ack{ID: "r-1", OK: true, Duplicate: true}
	if err := WriteAck(&buf, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAck(&buf, testMax)
	if err != nil || got != want {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
}

func TestValidateRejectsUnusableReports(t *testing.T) {
	long := string(bytes.Repeat([]byte("m"), MaxNameLen+1))
	tests := []struct {
		name string
		rep  ProfileReport
	}{
		{"missing id is rejected", ProfileReport{Record: profile.Record{Model: "m"}}},
		{"missing model is rejected", ProfileReport{Record: profile.Record{ID: "1"}}},
		{"overlong model is rejected", ProfileReport{Record: profile.Record{ID: "1", Model: long}}},
		{"non-UTF-8 model is rejected", ProfileReport{Record: profile.Record{ID: "1", Model: "\xff"}}},
		{"huge sweep is rejected", ProfileReport{Record: profile.Record{ID: "1", Model: "m",
			CPUSweep: make([]profile.Measurement, MaxSweepLen+1)}}},
		{"NaN throughput is rejected", ProfileReport{Record: profile.Record{ID: "1", Model: "m",
			CPUSweep: []profile.Measurement{{CPUs: 1, Throughput: math.NaN()}}}}},
		{"infinite memory bandwidth is rejected", ProfileReport{Record: profile.Record{ID: "1", Model: "m", MemBW: math.Inf(1)}}},
		{"overlong GPU type is rejected", ProfileReport{Record: profile.Record{ID: "1", Model: "m", GPUType: long[:MaxGPUTypeLen+1]}}},
		{"non-UTF-8 GPU type is rejected", ProfileReport{Record: profile.Record{ID: "1", Model: "m", GPUType: "a\xff"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.rep.Validate(); !errors.Is(err, ErrBody) {
				t.Fatalf("got %v, want ErrBody", err)
			}
		})
	}
	tel := TelemetryReport{}
	if err := tel.Validate(); !errors.Is(err, ErrBody) {
		t.Fatalf("telemetry without node: got %v, want ErrBody", err)
	}
}

func TestUnmarshalRejectsGarbage(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty body is rejected", nil},
		{"array claiming 4 billion entries is rejected", []byte{0xdd, 0xff, 0xff, 0xff, 0xff}},
		{"string where a map belongs is rejected", []byte{0xa3, 'a', 'b', 'c'}},
		{"map with a truncated key is rejected", []byte{0x81, 0xa4, 'c'}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r ProfileReport
			if err := Unmarshal(tc.in, &r); !errors.Is(err, ErrBody) {
				t.Fatalf("got %v, want ErrBody", err)
			}
		})
	}
}
