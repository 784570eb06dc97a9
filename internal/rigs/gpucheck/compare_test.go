package gpucheck

import (
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/node-agent/telemetry"
)

var twoLoads = []Load{{Name: "a", PID: 100, BusyPct: 60, MemMiB: 2048}, {Name: "b", PID: 200, BusyPct: 25, MemMiB: 6144}}

// agreeing is a round in which the agent and the driver agree on both
// loads.
func agreeing() Round {
	return Round{
		Index: 1, Window: 5 * time.Second,
		Agent: []telemetry.GPUProcess{
			{GPU: 0, UUID: "GPU-a", PID: 100, MemUsedMB: 2566, MemTotalMB: 81559, UtilPct: 58.5, UtilKnown: true},
			{GPU: 0, UUID: "GPU-a", PID: 200, MemUsedMB: 6662, MemTotalMB: 81559, UtilPct: 24, UtilKnown: true},
		},
		AgentGPUs: []wire.GPU{{Index: 0, UUID: "GPU-a", UtilPct: 85, MemUsedMB: 9800, MemTotalMB: 81559}},
		Apps:      []App{{PID: 100, UUID: "GPU-a", MemMiB: 2566, MemKnown: true}, {PID: 200, UUID: "GPU-a", MemMiB: 6662, MemKnown: true}},
		Pmon:      []PmonSample{{PID: 100, SM: 60, SMKnown: true}, {PID: 100, SM: 57, SMKnown: true}, {PID: 200, SM: 25, SMKnown: true}},
		GPUs:      []GPUInfo{{UUID: "GPU-a", MemUsedMiB: 9300, MemTotalMiB: 81559, UtilPct: 84, UtilKnown: true}},
	}
}

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Round)
		// fail: substrings of the failing findings' "What: Detail", one
		// each; none when the round agrees.
		fail []string
	}{
		{"agreeing figures pass", func(*Round) {}, nil},
		{"memory a few MiB off nvidia-smi fails", func(r *Round) { r.Agent[0].MemUsedMB = 2570 },
			[]string{"memory vs nvidia-smi: agent 2570.0 MiB, nvidia-smi 2566 MiB (+4.0"}},
		{"memory under the allocation fails", func(r *Round) { r.Agent[1].MemUsedMB, r.Apps[1].MemMiB = 100, 100 },
			[]string{"memory vs allocated: agent 100.0 MiB for 6144 MiB allocated"}},
		{"memory far over the allocation fails", func(r *Round) { r.Agent[0].MemUsedMB, r.Apps[0].MemMiB = 4000, 4000 },
			[]string{"memory vs allocated: agent 4000.0 MiB for 2048"}},
		{"utilisation far from the busy share and pmon fails twice", func(r *Round) { r.Agent[0].UtilPct = 30 },
			[]string{"utilisation vs busy set: agent 30.0% over 5.0 s, busy set 60%", "utilisation vs pmon: agent 30.0%, pmon mean 58.5%"}},
		{"utilisation pmon has but the agent lacks fails", func(r *Round) { r.Agent[1].UtilKnown, r.Agent[1].UtilPct = false, 0 },
			[]string{"utilisation: the agent has no utilisation; pmon 25.0%"}},
		{"a load the agent misses but nvidia-smi lists fails", func(r *Round) { r.Agent = r.Agent[:1] },
			[]string{"listed: b: nvidia-smi lists it, the agent's list does not"}},
		{"a process nvidia-smi lists that the agent does not fails", func(r *Round) {
			r.Apps = append(r.Apps, App{PID: 300, Name: "nvidia-cuda-mps-server", MemMiB: 30, MemKnown: true})
		}, []string{"listed: nvidia-smi lists pid 300 (nvidia-cuda-mps-server) (30 MiB), the agent's list does not"}},
		{"a process the agent lists that nvidia-smi does not fails", func(r *Round) {
			r.Agent = append(r.Agent, telemetry.GPUProcess{PID: 300, UUID: "GPU-a", MemUsedMB: 30})
		}, []string{"listed: the agent lists pid 300 (30.0 MiB), nvidia-smi does not"}},
		{"an agent failure fails the round", func(r *Round) { r.AgentErr = "nvml: GPU 0: running processes: ERROR_UNKNOWN" },
			[]string{"agent: the agent's NVML path failed: nvml: GPU 0"}},
		{"no reference from nvidia-smi fails", func(r *Round) { r.Apps, r.AppsErr = nil, "exit status 6" },
			[]string{"nvidia-smi: no reference"}},
		{"no pmon is a note: the busy share is still compared", func(r *Round) { r.Pmon, r.PmonErr = nil, "not supported" }, nil},
		{"memory neither side can tell is a note", func(r *Round) {
			r.Agent[1].MemUsedMB, r.Apps[1].MemKnown, r.Apps[1].MemMiB = 0, false, 0
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := agreeing()
			tc.edit(&r)
			fs := Compare(Config{Loads: twoLoads, Tol: DefaultTolerance}, r)
			var fails []string
			for _, f := range fs {
				if f.Verdict == Fail {
					fails = append(fails, f.What+": "+f.Detail)
				}
			}
			if len(fails) != len(tc.fail) || Fails(fs) != len(tc.fail) {
				t.Fatalf("failing findings %q, want %d like %q", fails, len(tc.fail), tc.fail)
			}
			for i, want := range tc.fail {
				if !strings.Contains(fails[i], want) {
					t.Errorf("finding %d %q, want it to contain %q", i, fails[i], want)
				}
			}
		})
	}
}

func TestCompareNamesTheDriverWhenPmonIsAsFarOffTheLoad(t *testing.T) {
	r := agreeing()
	// Two loads time-sliced: the driver gives the 60% load 28% and the
	// 25% load 60%; the agent reads the same.
	r.Agent[0].UtilPct, r.Agent[1].UtilPct = 33, 57
	r.Pmon = []PmonSample{{PID: 100, SM: 28.4, SMKnown: true}, {PID: 200, SM: 59.6, SMKnown: true}}
	fs := Compare(Config{Loads: twoLoads, Tol: DefaultTolerance}, r)
	if Fails(fs) != 0 || DriverOff(fs) != 2 {
		t.Fatalf("%d fails and %d driver-off findings, want 0 and 2: %+v", Fails(fs), DriverOff(fs), fs)
	}
	// Where pmon is near the load and the agent is not, it is the agent's.
	r.Pmon = []PmonSample{{PID: 100, SM: 58, SMKnown: true}, {PID: 200, SM: 26, SMKnown: true}}
	fs = Compare(Config{Loads: twoLoads, Tol: DefaultTolerance}, r)
	if Fails(fs) != 4 || DriverOff(fs) != 0 {
		t.Fatalf("%d fails and %d driver-off findings, want 4 (busy set and pmon, twice) and 0", Fails(fs), DriverOff(fs))
	}
	// Without pmon nothing clears the agent.
	r.Pmon, r.PmonErr = nil, "not supported"
	if fs = Compare(Config{Loads: twoLoads, Tol: DefaultTolerance}, r); Fails(fs) != 2 {
		t.Fatalf("%d fails without pmon, want 2", Fails(fs))
	}
}

func TestCompareHoldsAContendedLoadToPmonOnly(t *testing.T) {
	r := agreeing()
	// Asked for 80% beside another's 30%, it got 58.5% (pmon 58.5%).
	cfg := Config{Loads: []Load{{Name: "a", PID: 100, BusyPct: 80, MemMiB: 2048}, twoLoads[1]}, Tol: DefaultTolerance, BusyIsDemand: true}
	fs := Compare(cfg, r)
	if n := Fails(fs); n != 0 {
		t.Fatalf("%d fails, want none: %+v", n, fs)
	}
	var asked bool
	for _, f := range fs {
		if f.PID == 100 && f.What == "utilisation vs busy asked" && f.Verdict == Note && strings.Contains(f.Detail, "busy asked 80% (-21.5 points") {
			asked = true
		}
	}
	if !asked {
		t.Fatalf("no note of what was asked: %+v", fs)
	}
	// pmon still judges it.
	r.Agent[0].UtilPct = 20
	if n := Fails(Compare(cfg, r)); n != 1 {
		t.Fatalf("%d fails with the agent 38 points under pmon, want 1", n)
	}
}

func TestCompareReportsMemoryNoProcessAccountsFor(t *testing.T) {
	fs := Compare(Config{Loads: twoLoads, Tol: DefaultTolerance}, agreeing())
	last := fs[len(fs)-1]
	if last.Verdict != Note || last.What != "GPU 0" ||
		!strings.Contains(last.Detail, "its 2 process(es) hold 9228.0 MiB, 572.0 MiB no process accounts for") ||
		!strings.Contains(last.Detail, "memory used 9300 of 81559 MiB (agent +500.0 MiB)") {
		t.Fatalf("GPU finding %+v", last)
	}
}

func TestMPSViewSaysWhetherClientsAreSeenByTheirPid(t *testing.T) {
	r := agreeing()
	r.Names = map[int]string{300: "nvidia-cuda-mps"}
	r.MPS = []RawProcess{{PID: 100, MemMiB: 2566, MemKnown: true}, {PID: 200, MemMiB: 6662, MemKnown: true}}
	v := MPSView(twoLoads, r)
	if got := v[len(v)-2]; got != "=> the agent's list shows 2 of 2 MPS clients by their own pid (2 with memory)" {
		t.Fatalf("clients listed: %q", got)
	}
	// Only the server in the agent's list.
	r.Agent = []telemetry.GPUProcess{{PID: 300, UUID: "GPU-a", MemUsedMB: 9000, UtilPct: 80, UtilKnown: true}}
	v = MPSView(twoLoads, r)
	joined := strings.Join(v, "\n")
	wantAll(t, joined,
		"client a pid 100: not in the agent's list",
		"also in the agent's list: pid 300 (nvidia-cuda-mps) 9000.0 MiB utilisation 80.0%",
		"NVML's MPS list (not read by the agent): 2 process(es) [pid 100 2566 MiB pid 200 6662 MiB]",
		"=> the agent's list shows 0 of 2 MPS clients by their own pid (0 with memory)",
		"=> utilisation: 0.0% on the clients' pids, 80.0% on the other pids (the MPS server's)",
	)
}

func TestParseLoad(t *testing.T) {
	l, err := ParseLoad("a:1234:60:2048")
	if err != nil || l != (Load{Name: "a", PID: 1234, BusyPct: 60, MemMiB: 2048}) {
		t.Fatalf("ParseLoad = %+v, %v", l, err)
	}
	for _, bad := range []string{"a:1234:60", ":1:2:3", "a:0:60:1", "a:1:101:1", "a:1:NaN:1", "a:1:5:-1", "a:x:5:1"} {
		if _, err := ParseLoad(bad); err == nil {
			t.Errorf("ParseLoad(%q) accepted", bad)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{Phase: "pair", Loads: twoLoads, Intervals: []time.Duration{5 * time.Second}, Tol: DefaultTolerance}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no phase name is refused", func(c *Config) { c.Phase = "" }, "-phase"},
		{"no interval is refused", func(c *Config) { c.Intervals = nil }, "-intervals"},
		{"a sub-second interval is refused", func(c *Config) { c.Intervals = []time.Duration{time.Millisecond} }, "-intervals"},
		{"a pid twice is refused", func(c *Config) { c.Loads = []Load{twoLoads[0], twoLoads[0]} }, "twice"},
		{"a negative tolerance is refused", func(c *Config) { c.Tol.UtilPts = -1 }, "tolerances"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
