package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestJobEndReportValidation(t *testing.T) {
	tests := []struct {
		name    string
		rep     JobEndReport
		wantErr bool
	}{
		{"report naming node, job and end is accepted", JobEndReport{Node: "n1", JobID: 7, End: 1_700_000_000}, false},
		{"largest end is accepted", JobEndReport{Node: "n1", JobID: 7, End: MaxEndUnix}, false},
		{"missing node is refused", JobEndReport{JobID: 7, End: 1}, true},
		{"overlong node is refused", JobEndReport{Node: strings.Repeat("n", MaxNameLen+1), JobID: 7, End: 1}, true},
		{"non-UTF-8 node is refused", JobEndReport{Node: "\xff", JobID: 7, End: 1}, true},
		{"job 0 is refused", JobEndReport{Node: "n1", End: 1}, true},
		{"end 0 is refused", JobEndReport{Node: "n1", JobID: 7}, true},
		{"negative end is refused", JobEndReport{Node: "n1", JobID: 7, End: -5}, true},
		{"end past the year 9999 is refused", JobEndReport{Node: "n1", JobID: 7, End: MaxEndUnix + 1}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rep.Validate()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Validate() = %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrBody) {
				t.Fatalf("error %v does not wrap ErrBody", err)
			}
		})
	}
}

func TestJobEndFrameIsAReportThatNeedsACredential(t *testing.T) {
	if !TypeJobEnd.Known() || !TypeJobEnd.IsReport() {
		t.Fatal("job-end frames must be known reports")
	}
	if _, err := AppendFrame(nil, TypeJobEnd, "", []byte{0x80}); !errors.Is(err, ErrCredLength) {
		t.Fatalf("job-end frame without credential: %v, want ErrCredLength", err)
	}
	b, err := Marshal(&JobEndReport{Node: "n1", JobID: 9, End: 1234})
	if err != nil {
		t.Fatal(err)
	}
	var got JobEndReport
	if err := Unmarshal(b, &got); err != nil || got != (JobEndReport{Node: "n1", JobID: 9, End: 1234}) {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	if got.AckID() != "9@n1" {
		t.Fatalf("AckID = %q", got.AckID())
	}
}
