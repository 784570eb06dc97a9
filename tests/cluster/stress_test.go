package cluster_test

import (
	"fmt"
	"math/rand"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/profile"
)

// From Slurm 23.02 slurmctld runs job_submit on several RPC threads at once
// (src/interfaces/job_submit.c takes its plugin lock for reading; 22.05
// held a mutex around every call), and job_modify beside them. Many
// clients submit jobs of six models, each profiled with its own best case,
// while others `scontrol update` jobs already in (fields job_modify sees):
// every job must come out sized for its own model, none lost, none left
// unsized. The jobs are held, so only sizing is measured, not scheduling.
// The figures (rate, sbatch latency) go to the test log.
func TestConcurrentSubmitsAndModifiesEachGetTheirOwnSizing(t *testing.T) {
	const clients, perClient, modifiers = 16, 16, 4
	type model struct {
		name  string
		cpus  int
		memMB int
	}
	var models []model
	var profiles []profile.Record
	for i := range 6 {
		m := model{name: fmt.Sprintf("stress-m%d", i), cpus: 1 + i%4, memMB: 1024 + 256*i}
		models = append(models, m)
		profiles = append(profiles, profileOf(m.name, m.cpus, float64(m.memMB)/1024))
	}
	// A fictional node that holds every best case: sizing, not the fit,
	// decides each job's numbers.
	hw := shape{Nodes: 1, GPUs: 8, CPUs: 64, MemMB: 256000}
	e := startSeededCluster(t, hw, "", profiles, "JobSubmitPlugins=synergy")

	type submitted struct {
		id      uint32
		model   model
		latency time.Duration
	}
	var (
		mu      sync.Mutex
		jobs    []submitted
		errs    []string
		updates int
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		errs = append(errs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perClient {
				m := models[(c+i)%len(models)]
				t0 := time.Now()
				id, err := e.c.Submit("--hold", "-J", fmt.Sprintf("stress-%d-%d", c, i),
					"--comment=model="+m.name, "--gpus=1", "--wrap", "true")
				if err != nil {
					fail("client %d job %d (%s): %v", c, i, m.name, err)
					continue
				}
				mu.Lock()
				jobs = append(jobs, submitted{id: id, model: m, latency: time.Since(t0)})
				mu.Unlock()
			}
		}()
	}
	var mwg sync.WaitGroup
	for k := range modifiers {
		mwg.Add(1)
		go func() {
			defer mwg.Done()
			rng := rand.New(rand.NewSource(int64(k)))
			for {
				select {
				case <-done:
					return
				default:
				}
				mu.Lock()
				n := len(jobs)
				var id uint32
				if n > 0 {
					id = jobs[rng.Intn(n)].id
				}
				mu.Unlock()
				if n == 0 {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				field := fmt.Sprintf("TimeLimit=%d", 10+rng.Intn(100))
				if rng.Intn(2) == 0 {
					field = fmt.Sprintf("Name=stress-renamed-%d", rng.Intn(1000))
				}
				if out, err := e.c.Run("scontrol", "update", "jobid="+strconv.Itoa(int(id)), field); err != nil {
					fail("scontrol update %d %s: %v: %s", id, field, err, out)
					continue
				}
				mu.Lock()
				updates++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(done)
	mwg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d submissions or updates failed; first: %s", len(errs), clients*perClient, errs[0])
	}

	// Nothing lost: every job is in slurmctld, once.
	all := e.jobs()
	if len(jobs) != clients*perClient {
		t.Fatalf("%d jobs submitted, want %d", len(jobs), clients*perClient)
	}
	for _, j := range jobs {
		if _, ok := all[j.id]; !ok {
			t.Fatalf("job %d (%s) is not in slurmctld", j.id, j.model.name)
		}
	}
	// Each job sized for its own model, none mixed up, none unsized.
	sized := regexp.MustCompile(`model=(\S+) profile best case: .*\[lachesis:sized cpus=(\d+) mem=(\d+) `)
	for _, j := range jobs {
		d, err := e.c.ShowJob(j.id)
		if err != nil {
			t.Fatal(err)
		}
		f := d.Fields
		wantCPUs, wantMem := gresTRES(fmt.Sprintf("gpu:%d", j.model.cpus)), gresTRES(fmt.Sprintf("gpu:%d", j.model.memMB))
		m := sized.FindStringSubmatch(f["AdminComment"])
		if f["CpusPerTres"] != wantCPUs || f["MemPerTres"] != wantMem || m == nil ||
			m[1] != j.model.name || m[2] != strconv.Itoa(j.model.cpus) || m[3] != strconv.Itoa(j.model.memMB) {
			t.Fatalf("job %d of model %s: CpusPerTres=%s MemPerTres=%s AdminComment=%q; want %s, %s and its own model's sizing",
				j.id, j.model.name, f["CpusPerTres"], f["MemPerTres"], f["AdminComment"], wantCPUs, wantMem)
		}
	}
	if e.logMatches(`no sizing answer within|sizing failed`) {
		t.Fatal("slurmctld's log says a job was left unsized")
	}

	lat := make([]time.Duration, len(jobs))
	for i, j := range jobs {
		lat[i] = j.latency
	}
	slices.Sort(lat)
	t.Logf("Slurm %s: %d jobs of %d models from %d clients at once, %d scontrol updates beside them, in %v: %.1f submissions/s; sbatch latency median %v, p99 %v, max %v",
		slurmRelease, len(jobs), len(models), clients, updates, elapsed.Round(time.Millisecond),
		float64(len(jobs))/elapsed.Seconds(), lat[len(lat)/2].Round(time.Millisecond),
		lat[len(lat)*99/100].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
}
