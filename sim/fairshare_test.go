package sim

import (
	"errors"
	"math"
	"testing"

	"github.com/lachesis-sched/lachesis/policy/priority"
)

// floodAndLate: account "flood" queues ten 100 s jobs at 0 on two GPUs,
// account "late" four at 10. One queue, no promotion, no costs: only fair
// share can put late's jobs before flood's backlog.
func floodAndLate(t *testing.T) *Trace {
	t.Helper()
	tr := &Trace{Name: "flood-and-late"}
	for i := range 10 {
		tr.Jobs = append(tr.Jobs, Job{ID: uint32(i + 1), Submit: 0, GPUs: 1, Duration: 100, Cluster: "flood"})
	}
	for i := range 4 {
		tr.Jobs = append(tr.Jobs, Job{ID: uint32(11 + i), Submit: 10, GPUs: 1, Duration: 100, Cluster: "late"})
	}
	if err := tr.Normalise(); err != nil {
		t.Fatal(err)
	}
	return tr
}

func floodConfig(fairShare bool) Config {
	cfg := DefaultConfig()
	cfg.NoCosts()
	cfg.Shape = Shape{Nodes: 1, GPUsPerNode: 2, GPUCountOnly: true}
	cfg.Policy = PolicyLAS
	cfg.PolicyOptions.Tiresias.FixThresholds([]float64{1e9})
	cfg.PolicyOptions.Tiresias.PromoteKnob = 0
	cfg.PolicyOptions.Tiresias.FairShare.Enabled = fairShare
	return cfg
}

func accountOf(r *Result, name string) AccountSummary {
	for _, a := range r.Accounts {
		if a.Account == name {
			return a
		}
	}
	return AccountSummary{}
}

func TestFairShare_LateAccountOvertakesTheFloodsBacklog(t *testing.T) {
	tests := []struct {
		name      string
		fairShare bool
		// Without fair share flood's backlog runs first (0-500), late's
		// jobs at 500-700. With it, late (no usage) takes both GPUs at
		// 100; at 200 both accounts are at their share (200 GPU-s each)
		// and queue entry puts flood first; at 300 flood is over its
		// share and late's last two run 300-400.
		wantLateJCT []float64
	}{
		{"without fair share the backlog goes first", false, []float64{590, 590, 690, 690}},
		{"with fair share late's jobs alternate with the backlog", true, []float64{190, 190, 390, 390}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runOK(t, floodConfig(tt.fairShare), floodAndLate(t))
			for i, want := range tt.wantLateJCT {
				if got := jctOf(r, uint32(11+i)); got != want {
					t.Errorf("late job %d JCT = %v, want %v", 11+i, got, want)
				}
			}
			late := accountOf(r, "late")
			if late.Jobs != 4 || late.GPUSeconds != 400 || math.Abs(late.GPUShare-400.0/1400) > 1e-12 {
				t.Errorf("late's summary %+v; want 4 jobs, 400 GPU-s, 2/7 of all GPU time", late)
			}
		})
	}
	off := runOK(t, floodConfig(false), floodAndLate(t))
	on := runOK(t, floodConfig(true), floodAndLate(t))
	if a, b := accountOf(off, "late").ContendedShare, accountOf(on, "late").ContendedShare; !(b > a) {
		t.Errorf("late's share of contended GPU time: %v without fair share, %v with; want more with", a, b)
	}
}

// Every GPU-second a job attains is charged to its account once: the
// usage table plus the completions not yet charged add up to the jobs'
// service (a half-life of ten years decays a few days' usage by < 0.1 %).
func TestFairShare_ChargesEveryServiceSecondOnce(t *testing.T) {
	tr := phillySlice(t, 400)
	cfg := DefaultConfig()
	cfg.Shape = Shape{Nodes: 4, GPUsPerNode: 8, GPUCountOnly: true}
	cfg.Policy = PolicyGittins
	cfg.PolicyOptions.Tiresias.FairShare.Enabled = true
	cfg.PolicyOptions.Tiresias.FairShare.HalfLife = priority.MaxHalfLife
	e, err := newEngine(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.loop(); err != nil {
		t.Fatal(err)
	}
	fair := e.policy.Order.(*tiresiasOrder).fair
	var service, charged float64
	for i := range e.jobs {
		service += e.jobs[i].Account.Total()
	}
	for _, u := range fair.table.AppendUsage(nil) {
		charged += u.Usage
	}
	for _, c := range fair.done {
		charged += c.gpuSeconds
	}
	if service == 0 || math.Abs(charged-service)/service > 2e-3 {
		t.Fatalf("accounts were charged %.0f GPU-s for %.0f GPU-s of service", charged, service)
	}
	if accounts := fair.table.Len(); accounts < 2 {
		t.Fatalf("the slice has %d accounts; the test needs several", accounts)
	}
}

func TestFairShare_RejectedWithReferencePreemption(t *testing.T) {
	opts := DefaultPolicyOptions()
	opts.Tiresias.FairShare.Enabled = true
	opts.ReferencePreemption = true
	if _, err := NewPolicy(PolicyLAS, opts); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("NewPolicy = %v, want ErrBadConfig", err)
	}
}

// Shares move the split: with three times flood's shares, late stays under
// its share at 200 (200 GPU-s each: late's share is 3/4) and runs its last
// two jobs before flood's backlog.
func TestFairShare_LateAccountWithMoreSharesRunsSooner(t *testing.T) {
	tests := []struct {
		name        string
		shares      map[string]float64
		wantLateJCT []float64
	}{
		{"equal shares alternate the two accounts", nil, []float64{190, 190, 390, 390}},
		{"late with three times the shares runs its last two next", map[string]float64{"late": 3}, []float64{190, 190, 290, 290}},
		// flood stays under 5/6 of the usage until its backlog is done
		// (800 of 1000 GPU-s at 500).
		{"flood with five times the shares runs its whole backlog first", map[string]float64{"flood": 5}, []float64{190, 190, 690, 690}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := floodConfig(true)
			cfg.PolicyOptions.Tiresias.FairShare.Shares = tt.shares
			r := runOK(t, cfg, floodAndLate(t))
			for i, want := range tt.wantLateJCT {
				if got := jctOf(r, uint32(11+i)); got != want {
					t.Errorf("late job %d JCT = %v, want %v", 11+i, got, want)
				}
			}
		})
	}
}

func TestParseShares(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]float64
		wantErr bool
	}{
		{"empty list gives no shares", "", map[string]float64{}, false},
		{"two accounts are read", "a=3, b=0.5", map[string]float64{"a": 3, "b": 0.5}, false},
		{"missing equals sign is refused", "a3", nil, true},
		{"empty account name is refused", "=3", nil, true},
		{"zero shares are refused", "a=0", nil, true},
		{"negative shares are refused", "a=-1", nil, true},
		{"non-number shares are refused", "a=x", nil, true},
		{"infinite shares are refused", "a=Inf", nil, true},
		{"an account named twice is refused", "a=1,a=2", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseShares(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrBadShares) {
					t.Fatalf("ParseShares(%q) error %v, want ErrBadShares", tt.in, err)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("ParseShares(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Fatalf("ParseShares(%q)[%q] = %v, want %v", tt.in, k, got[k], v)
				}
			}
		})
	}
}
