package agentserver_test

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/agentserver"
	"github.com/lachesis-sched/lachesis/internal/protocol/munge/mungetest"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
)

// selfRSS is this process's resident memory in bytes.
func selfRSS(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkProfileFlood is issue 20 item 5's flood as the core sees it:
// one node's agent (one user behind it) sends b.N profiles of new models
// through the listener of a Service (SQLite, the cache) with the default
// lachesis.yaml, while job_submit looks a model up. It reports the
// process's RSS growth, the heap left after a GC, how many profiles were
// stored, and a lookup's time during the flood. Run it with -benchtime
// 5000x; before the quotas every profile was stored and cached.
func BenchmarkProfileFlood(b *testing.B) {
	fake := &mungetest.Fake{}
	svc, err := agentserver.NewService(agentserver.ServiceConfig{Addr: "127.0.0.1:0", DBPath: filepath.Join(b.TempDir(), "lachesis.db"), Verifier: fake},
		slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close()
	addr := svc.Server().Addr().String()
	frames := make([][]byte, b.N)
	for i := range frames {
		rec := record(fmt.Sprint("flood-", i))
		rec.Model = fmt.Sprint("model-", i)
		raw, err := wire.EncodeReport(fake, wire.TypeProfile, &wire.ProfileReport{Record: rec})
		if err != nil {
			b.Fatal(err)
		}
		frames[i] = raw
	}
	runtime.GC()
	rss0 := selfRSS(b)
	stop, done := make(chan struct{}), make(chan struct{})
	var lookups, lookupNs int64
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			begin := time.Now()
			svc.Profile("model-1", 0)
			lookupNs += int64(time.Since(begin))
			lookups++
			time.Sleep(100 * time.Microsecond)
		}
	}()
	stored := 0
	b.ResetTimer()
	for i := range b.N {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		c.Write(frames[i])
		ack, err := wire.ReadAck(c, 1<<20)
		c.Close()
		if err != nil {
			b.Fatal(err)
		}
		if ack.OK {
			stored++
		}
	}
	b.StopTimer()
	close(stop)
	<-done
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(stored), "stored")
	b.ReportMetric(float64(selfRSS(b)-rss0)/(1<<20), "RSS-growth-MB")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MB")
	if lookups > 0 {
		b.ReportMetric(float64(lookupNs)/float64(lookups), "ns/lookup")
	}
}
