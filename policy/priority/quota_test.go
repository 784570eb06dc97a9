package priority

import "testing"

func TestQuotaOffIsTodaysRule(t *testing.T) {
	p := DefaultPreemption()
	for _, c := range []struct{ pre, vic Candidate }{
		{Candidate{Queue: 0}, Candidate{Queue: 1, RunSeconds: 1e6}},
		{Candidate{Queue: 1}, Candidate{Queue: 0, RunSeconds: 1e6}},
		{Candidate{Queue: 0}, Candidate{Queue: 1, RunSeconds: 1}},
		{Candidate{Queue: 0, Opportunistic: true}, Candidate{Queue: 1, RunSeconds: 1e6}},
	} {
		want := p.Decide(c.pre, c.vic)
		for _, classes := range [][2]QuotaClass{{QuotaOff, QuotaOff}, {QuotaWithin, QuotaOff}, {QuotaOff, QuotaBorrowing}} {
			got := p.DecideQuota(QuotaCandidate{Candidate: c.pre, Account: "a", Quota: classes[0]},
				QuotaCandidate{Candidate: c.vic, Account: "b", Quota: classes[1]})
			if got != want {
				t.Errorf("%+v → %+v with %v: %v, want Decide's %v", c.pre, c.vic, classes, got, want)
			}
		}
	}
	if QuotaOrder(QuotaOff, QuotaWithin) != 0 || QuotaOrder(QuotaOff, QuotaOff) != 0 {
		t.Error("QuotaOff orders")
	}
}

func TestReclaimAllowedAcrossQueuesAndRuns(t *testing.T) {
	p := DefaultPreemption()
	owner := QuotaCandidate{Candidate: Candidate{Queue: 3}, Account: "own", Quota: QuotaWithin}
	borrower := QuotaCandidate{Candidate: Candidate{Queue: 0, RunSeconds: 5}, Account: "b", Quota: QuotaBorrowing}
	if v := p.DecideQuota(owner, borrower); v != Allowed {
		t.Fatalf("reclaim of a borrower in a better queue, short run: %v, want allowed", v)
	}
	borrower.Tier = 1
	if v := p.DecideQuota(owner, borrower); v != DeniedTier {
		t.Fatalf("a higher tier: %v", v)
	}
}

func TestWithinQuotaNeverPreemptedByAnotherAccount(t *testing.T) {
	p := DefaultPreemption()
	pre := QuotaCandidate{Candidate: Candidate{Queue: 0}, Account: "a", Quota: QuotaWithin}
	vic := QuotaCandidate{Candidate: Candidate{Queue: 3, RunSeconds: 1e6}, Account: "b", Quota: QuotaWithin}
	if v := p.DecideQuota(pre, vic); v != DeniedWithinQuota {
		t.Fatalf("got %v, want %v", v, DeniedWithinQuota)
	}
	// Its own account's jobs: Tiresias's rule among themselves.
	vic.Account = "a"
	if v := p.DecideQuota(pre, vic); v != p.Decide(pre.Candidate, vic.Candidate) {
		t.Fatalf("same account: %v", v)
	}
	// A borrower does not reclaim from a borrower: Tiresias's rule.
	pre.Quota, vic.Quota, vic.Account = QuotaBorrowing, QuotaBorrowing, "b"
	if v := p.DecideQuota(pre, vic); v != p.Decide(pre.Candidate, vic.Candidate) {
		t.Fatalf("borrower vs borrower: %v", v)
	}
}

func TestQuotaOrderWithinFirst(t *testing.T) {
	if QuotaOrder(QuotaWithin, QuotaBorrowing) >= 0 || QuotaOrder(QuotaBorrowing, QuotaWithin) <= 0 || QuotaOrder(QuotaWithin, QuotaWithin) != 0 {
		t.Fatal("within-quota jobs must come first")
	}
}

// With quotas, a within-quota job in a worse queue ranks (and is
// prioritised) above a borrower in a better queue that waited longer;
// among the within-quota jobs Tiresias's queues still order; off, the
// class is ignored.
func TestQuotaBandsPutWithinQuotaAboveBorrowers(t *testing.T) {
	cfg := testConfig()
	cfg.Quotas = true
	jobs := []Job{
		{ID: 1, State: Pending, GPUs: 1, Queue: 0, QueueEntry: 10, SubmitTime: 10, Quota: QuotaBorrowing},
		{ID: 2, State: Pending, GPUs: 1, Service: 15, Queue: 1, QueueEntry: 900, SubmitTime: 900, Quota: QuotaWithin},
		{ID: 3, State: Pending, GPUs: 1, Queue: 0, QueueEntry: 950, SubmitTime: 950, Quota: QuotaWithin},
	}
	res := byID(mustRanker(t, cfg, nil).Rank(now, jobs, nil))
	if !(res[3].Rank < res[2].Rank && res[2].Rank < res[1].Rank) {
		t.Fatalf("ranks %d %d %d, want job 3, 2 then the borrower 1", res[3].Rank, res[2].Rank, res[1].Rank)
	}
	if !(res[3].Priority > res[2].Priority && res[2].Priority > res[1].Priority) {
		t.Fatalf("priorities %d %d %d, want descending 3, 2, 1", res[3].Priority, res[2].Priority, res[1].Priority)
	}
	if st := mustRanker(t, cfg, nil).Standing(now, Job{ID: 4, GPUs: 1, Quota: QuotaBorrowing}); st.Priority >= res[2].Priority {
		t.Fatalf("a new borrower stands at %d, above the within-quota job's %d", st.Priority, res[2].Priority)
	}
	cfg.Quotas = false
	res = byID(mustRanker(t, cfg, nil).Rank(now, jobs, nil))
	if res[1].Rank != 0 {
		t.Fatalf("without quotas the borrower in queue 0 who waited longest is first; ranks %+v", res)
	}
}
