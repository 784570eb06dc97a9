package priority

import "testing"

func TestAccount(t *testing.T) {
	type step func(a *Account)
	cases := []struct {
		name  string
		steps []step
		want  Account
	}{
		{
			name:  "a new job waits in queue 0 since its submission",
			steps: nil,
			want:  Account{QueueEntry: 100, WaitingSince: 100},
		},
		{
			name:  "a running job's service is GPUs times its run so far",
			steps: []step{func(a *Account) { a.ObserveRun(110, 2, 30) }},
			want:  Account{RunOpen: true, RunStart: 110, RunGPUs: 2, RunSeconds: 30, Runs: 1, QueueEntry: 100, WaitingSince: 100},
		},
		{
			name: "a new start time closes the old run into the closed service",
			steps: []step{
				func(a *Account) { a.ObserveRun(110, 2, 30) },
				func(a *Account) { a.ObserveRun(200, 1, 5) },
			},
			want: Account{ServiceClosed: 60, LastRun: 30, RunOpen: true, RunStart: 200, RunGPUs: 1, RunSeconds: 5, Runs: 2, QueueEntry: 100, WaitingSince: 100},
		},
		{
			name: "a requeued job keeps its service and waits from the end of its run",
			steps: []step{
				func(a *Account) { a.ObserveRun(110, 2, 30) },
				func(a *Account) { a.Requeued(a.RunEnd()) },
			},
			want: Account{ServiceClosed: 60, LastRun: 30, Runs: 1, QueueEntry: 100, WaitingSince: 140},
		},
		{
			name: "a pending job that never ran is not requeued",
			steps: []step{
				func(a *Account) { a.Requeued(999) },
			},
			want: Account{QueueEntry: 100, WaitingSince: 100},
		},
		{
			name: "promotion resets the queue service, keeps the total and restarts the wait",
			steps: []step{
				func(a *Account) { a.ObserveRun(110, 2, 30) },
				func(a *Account) { a.Requeued(a.RunEnd()) },
				func(a *Account) { a.Apply(300, Result{Queue: 0, QueueEntry: 300, Promoted: true}) },
			},
			want: Account{ServiceClosed: 60, ServiceBase: 60, LastRun: 30, Runs: 1, QueueEntry: 300, WaitingSince: 300, Promotions: 1},
		},
		{
			name: "a demotion moves the queue and keeps the service",
			steps: []step{
				func(a *Account) { a.ObserveRun(110, 4, 50) },
				func(a *Account) { a.Apply(160, Result{Queue: 1, QueueEntry: 160}) },
			},
			want: Account{RunOpen: true, RunStart: 110, RunGPUs: 4, RunSeconds: 50, Runs: 1, Queue: 1, QueueEntry: 160, WaitingSince: 100},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := NewAccount(100)
			for _, s := range c.steps {
				s(&a)
			}
			if a != c.want {
				t.Fatalf("account\n got %+v\nwant %+v", a, c.want)
			}
		})
	}
}

func TestAccountQueueServiceCountsOnlySinceThePromotion(t *testing.T) {
	a := NewAccount(0)
	a.ObserveRun(10, 2, 50) // 100 GPU-s
	a.Requeued(a.RunEnd())
	a.Apply(500, Result{Promoted: true})
	a.ObserveRun(600, 2, 10) // 20 more
	if got, want := a.Total(), 120.0; got != want {
		t.Errorf("Total = %v, want %v", got, want)
	}
	if got, want := a.QueueService(), 20.0; got != want {
		t.Errorf("QueueService = %v, want %v", got, want)
	}
	if got, want := a.ServiceAt(25), 150.0; got != want {
		t.Errorf("ServiceAt(25) = %v, want %v", got, want)
	}
}

func TestPreempts(t *testing.T) {
	cases := []struct {
		name              string
		preemptor, victim int
		want              bool
	}{
		{"a job in a better queue preempts a demoted one", 0, 1, true},
		{"jobs of one queue never preempt each other", 1, 1, false},
		{"a demoted job never preempts a better one", 2, 1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Preempts(c.preemptor, c.victim); got != c.want {
				t.Fatalf("Preempts(%d, %d) = %v, want %v", c.preemptor, c.victim, got, c.want)
			}
		})
	}
}
