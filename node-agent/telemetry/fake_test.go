package telemetry_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lachesis-sched/lachesis/internal/protocol/fakegpu"
	"github.com/lachesis-sched/lachesis/node-agent/config"
	"github.com/lachesis-sched/lachesis/node-agent/telemetry"
)

// fakeDevice is a 2-GPU fake device on a fresh directory whose processes
// (pid → owner uid) are owners.
func fakeDevice(t *testing.T, owners map[int]uint32) *telemetry.Fake {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fakegpu")
	if err := telemetry.PrepareFakeDir(dir); err != nil {
		t.Fatal(err)
	}
	return &telemetry.Fake{Dir: dir, GPUs: 2, Node: "n1", PIDOwner: func(pid int) (uint32, bool) {
		uid, ok := owners[pid]
		return uid, ok
	}}
}

// write puts a record file owned by uid.
func write(t *testing.T, f *telemetry.Fake, name string, rec any, uid int) string {
	t.Helper()
	var b []byte
	switch r := rec.(type) {
	case string:
		b = []byte(r)
	default:
		b, _ = json.Marshal(r)
	}
	p := filepath.Join(f.Dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, uid, uid); err != nil {
		t.Skipf("chown needs root: %v", err)
	}
	return p
}

func TestFakeDeviceSumsItsProcesses(t *testing.T) {
	f := fakeDevice(t, map[int]uint32{10: 1000, 11: 1001})
	write(t, f, "10", fakegpu.Record{PID: 10, GPUs: []int{0}, UtilPct: 70, MemMB: 1000}, 1000)
	write(t, f, "11", fakegpu.Record{PID: 11, GPUs: []int{0, 1}, UtilPct: 60, MemMB: 500}, 1001)
	gpus, err := f.Sample()
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 2 || gpus[0].UtilPct != 100 || gpus[0].MemUsedMB != 1500 || gpus[1].UtilPct != 60 ||
		gpus[1].UUID != "GPU-fake-n1-1" || gpus[1].MemTotalMB != fakegpu.MemTotalMB {
		t.Fatalf("got %+v: want GPU 0 capped at 100%% with 1500 MB, GPU 1 at 60%%", gpus)
	}
	procs, err := f.Processes()
	if err != nil || len(procs) != 3 {
		t.Fatalf("got %+v, %v: want pid 10 on GPU 0, pid 11 on GPUs 0 and 1", procs, err)
	}
	for _, p := range procs {
		if !p.UtilKnown || (p.PID == 11 && p.UtilPct != 60) {
			t.Fatalf("got %+v", p)
		}
	}
}

func TestFakeDeviceIgnoresHostileRecords(t *testing.T) {
	owners := map[int]uint32{10: 1000, 20: 0}
	good := fakegpu.Record{PID: 10, GPUs: []int{0}, UtilPct: 50, MemMB: 100}
	tests := []struct {
		name, why string
		make      func(t *testing.T, f *telemetry.Fake)
	}{
		{"a record naming another user's process is not believed", telemetry.IgnoredNotOwner, func(t *testing.T, f *telemetry.Fake) {
			write(t, f, "x", fakegpu.Record{PID: 20, GPUs: []int{0}, UtilPct: 99}, 1000)
		}},
		{"a record of a process that is gone is not believed", telemetry.IgnoredPIDGone, func(t *testing.T, f *telemetry.Fake) {
			write(t, f, "x", fakegpu.Record{PID: 30, GPUs: []int{0}, UtilPct: 99}, 1000)
		}},
		{"a record not refreshed is stale", telemetry.IgnoredStale, func(t *testing.T, f *telemetry.Fake) {
			p := write(t, f, "x", good, 1000)
			old := time.Now().Add(-2 * fakegpu.Stale)
			os.Chtimes(p, old, old)
		}},
		{"a symlink is not followed", telemetry.IgnoredNotRegular, func(t *testing.T, f *telemetry.Fake) {
			p := write(t, f, "target", good, 1000)
			os.Rename(p, p+".moved")
			os.Symlink(p+".moved", p)
			os.Chtimes(p+".moved", time.Now().Add(-time.Hour), time.Now().Add(-time.Hour))
		}},
		{"a FIFO does not stall the device", telemetry.IgnoredNotRegular, func(t *testing.T, f *telemetry.Fake) {
			if err := syscall.Mkfifo(filepath.Join(f.Dir, "fifo"), 0o666); err != nil {
				t.Fatal(err)
			}
		}},
		{"an oversized file is not read", telemetry.IgnoredTooLarge, func(t *testing.T, f *telemetry.Fake) {
			write(t, f, "x", strings.Repeat(" ", fakegpu.MaxRecordBytes+1), 1000)
		}},
		{"a GPU the device does not have is malformed", telemetry.IgnoredMalformed, func(t *testing.T, f *telemetry.Fake) {
			write(t, f, "x", fakegpu.Record{PID: 10, GPUs: []int{2}, UtilPct: 10}, 1000)
		}},
		{"utilisation over 100 is malformed", telemetry.IgnoredMalformed, func(t *testing.T, f *telemetry.Fake) {
			write(t, f, "x", fakegpu.Record{PID: 10, GPUs: []int{0}, UtilPct: 150}, 1000)
		}},
		{"an unknown field is malformed", telemetry.IgnoredMalformed, func(t *testing.T, f *telemetry.Fake) {
			write(t, f, "x", `{"pid":10,"gpus":[0],"util_pct":1,"job":5}`, 1000)
		}},
		{"a second record of one process is a duplicate", telemetry.IgnoredDuplicate, func(t *testing.T, f *telemetry.Fake) {
			write(t, f, "a", good, 1000)
			write(t, f, "b", good, 1000)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fakeDevice(t, owners)
			tt.make(t, f)
			procs, err := f.Processes()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range procs {
				if p.PID != 10 || p.UtilPct != 50 {
					t.Fatalf("believed %+v", p)
				}
			}
			if n := f.Ignored()[tt.why]; n != 1 {
				t.Fatalf("ignored %v, want one %s", f.Ignored(), tt.why)
			}
		})
	}
}

func TestFakeDeviceReadsABoundedDirectory(t *testing.T) {
	f := fakeDevice(t, map[int]uint32{})
	for i := range fakegpu.MaxRecords + 50 {
		write(t, f, fmt.Sprint(i), "{}", 0)
	}
	if _, err := f.Processes(); err != nil {
		t.Fatal(err)
	}
	ign := f.Ignored()
	if ign[telemetry.IgnoredTooMany] != 1 || ign[telemetry.IgnoredMalformed] != fakegpu.MaxRecords {
		t.Fatalf("ignored %v: want the first %d entries read, the rest counted once as too many", ign, fakegpu.MaxRecords)
	}
	if n := testutil.CollectAndCount(f, telemetry.MetricFakeIgnored); n != 8 {
		t.Fatalf("%d ignored-record series, want one per reason", n)
	}
}

func TestPrepareFakeDirRefusesALink(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	os.Symlink(dir, link)
	if err := telemetry.PrepareFakeDir(link); err == nil {
		t.Fatal("a link was accepted as the fake device's directory")
	}
	made := filepath.Join(dir, "made")
	if err := telemetry.PrepareFakeDir(made); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(made); fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Fatalf("mode %v, want sticky and world-writable", fi.Mode())
	}
}

func TestConfigBoundsTheFakeDeviceAsItDoes(t *testing.T) {
	if config.MaxFakeGPUs != telemetry.MaxFakeGPUs {
		t.Fatalf("config allows %d fake GPUs, the device %d", config.MaxFakeGPUs, telemetry.MaxFakeGPUs)
	}
}
