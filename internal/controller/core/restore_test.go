package core

import (
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

func TestParseMarker(t *testing.T) {
	good := markerOf(&ledger.Record{FirstSubmit: 1000, Account: priority.Account{ServiceClosed: 200.5, ServiceBase: 10,
		LastRun: 100, Queue: 1, Runs: 2, Promotions: 1, RunOpen: true, RunStart: 1200, RunGPUs: 4}}).String()
	tests := []struct {
		name    string
		in      string
		wantErr bool
		want    float64
	}{
		{"own marker parses back to its service", good, false, 200.5},
		{"admin text without prefix is rejected", "please do not touch", true, 0},
		{"truncated marker is rejected", MarkerPrefix + "sc=5 q=1", true, 0},
		{"negative service is rejected", MarkerPrefix + "sc=-1 sb=0 lr=0 q=0 r=0 p=0 fs=0 rs=0 rg=0", true, 0},
		{"garbage number is rejected", MarkerPrefix + "sc=x sb=0 lr=0 q=0 r=0 p=0 fs=0 rs=0 rg=0", true, 0},
		{"unknown later field is ignored", good + " zz=1", false, 200.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := parseMarker(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrMarker) {
				t.Fatalf("err %v does not wrap ErrMarker", err)
			}
			if err == nil && m.closed != tt.want {
				t.Fatalf("service = %v, want %v", m.closed, tt.want)
			}
		})
	}
}

// slurmSide keeps what Slurm would have saved: the last marker each job
// was handed.
type slurmSide map[uint32]string

func (s slurmSide) pass(c *Core, now int64, snaps ...Snapshot) []Decision {
	for i := range snaps {
		snaps[i].Marker = s[snaps[i].ID]
	}
	d := pass(c, now, snaps...)
	for i := range d {
		if d[i].Marker != "" {
			s[snaps[i].ID] = d[i].Marker
		}
	}
	return d
}

func TestServiceSurvivesKill9AfterFailedLedgerWrites(t *testing.T) {
	tests := []struct {
		name        string
		ledgerFails bool
		want        float64
	}{
		{"ledger lost every write: the marker restores service", true, 200},
		{"ledger wrote everything: the ledger is used", false, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "l.db")
			sq, err := ledger.Open(db)
			if err != nil {
				t.Fatal(err)
			}
			fs := &flakyStore{SQLite: sq, attempts: make(chan struct{}, 1)}
			fs.fail.Store(tt.ledgerFails)
			c, err := New(testConfig(db), fs, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			slurm := slurmSide{}
			slurm.pass(c, 1100, running(1, 2, 1000, 1000))     // 200 GPU-s
			before := slurm.pass(c, 1105, pending(1, 2, 1105)) // requeued
			c.Close()                                          // with writes failing, as good as kill -9

			c2 := openCore(t, db)
			defer c2.Close()
			after := slurm.pass(c2, 1110, pending(1, 2, 1105))
			if after[0].Service != tt.want || after[0].Queue != before[0].Queue {
				t.Fatalf("after restart %+v, before %+v; want service %v", after[0], before[0], tt.want)
			}
			rec, _ := c2.Record(1)
			if rec.FirstSubmit != 1000 || rec.Runs != 1 {
				t.Fatalf("record = %+v, want first submit 1000 and 1 run", rec)
			}
		})
	}
}

func TestMarkerIsHandedToSlurmOnlyWhenItChanges(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	slurm := slurmSide{}
	tests := []struct {
		name       string
		now        int64
		snap       Snapshot
		wantMarker bool
	}{
		{"new running job gets a marker", 1010, running(1, 1, 1000, 1000), true},
		{"same run a pass later: no write", 1020, running(1, 1, 1000, 1000), false},
		{"requeue closes the run: new marker", 1030, pending(1, 1, 1030), true},
		{"still pending: no write", 1040, pending(1, 1, 1030), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := slurm.pass(c, tt.now, tt.snap)
			if (d[0].Marker != "") != tt.wantMarker {
				t.Fatalf("marker = %q, want one: %v", d[0].Marker, tt.wantMarker)
			}
		})
	}
}
