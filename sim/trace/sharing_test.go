package trace

import (
	"errors"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/policy/sharing"
)

func TestJobListSharesAndClasses(t *testing.T) {
	t.Run("a share below one GPU and the class column are read", func(t *testing.T) {
		tr, err := ReadJobList(strings.NewReader("job_id,submit_time,gpus,duration,class\n1,0,0.25,60,opportunistic\n2,5,2,60,\n3,9,1,60,guaranteed\n"))
		if err != nil {
			t.Fatal(err)
		}
		want := []Job{
			{ID: 1, Submit: 0, GPUs: 1, Share: 0.25, Duration: 60, Class: sharing.Opportunistic},
			{ID: 2, Submit: 5, GPUs: 2, Duration: 60},
			{ID: 3, Submit: 9, GPUs: 1, Duration: 60},
		}
		for i, j := range tr.Jobs {
			if j != want[i] {
				t.Errorf("job %d = %+v, want %+v", i, j, want[i])
			}
		}
	})
	t.Run("a list without the new columns reads as before", func(t *testing.T) {
		tr, err := ReadJobList(strings.NewReader("job_id,submit_time,gpus,duration,model\n1,0,4.0,60,res18\n"))
		if err != nil {
			t.Fatal(err)
		}
		if j := tr.Jobs[0]; j.GPUs != 4 || j.Share != 0 || j.Class != sharing.Guaranteed {
			t.Errorf("job = %+v", j)
		}
	})
	for _, tc := range []struct{ name, gpus, class string }{
		{"a fraction above one GPU is refused", "1.5", ""},
		{"NaN GPUs are refused", "NaN", ""},
		{"a negative share is refused", "-0.5", ""},
		{"an unknown class is refused", "1", "root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadJobList(strings.NewReader("job_id,submit_time,gpus,duration,class\n1,0," + tc.gpus + ",60," + tc.class + "\n"))
			if !errors.Is(err, ErrBadTrace) {
				t.Errorf("err = %v, want ErrBadTrace", err)
			}
		})
	}
}

func TestPAIRequestMixFollowsThePublishedShares(t *testing.T) {
	tr := &Trace{Name: "pai"}
	for i := range 20000 {
		tr.Jobs = append(tr.Jobs, Job{ID: uint32(i + 1), Submit: float64(i), GPUs: 1 + i%3, Duration: 60})
	}
	ApplyPAIRequestMix(tr, 1)
	var n [5]int
	for _, j := range tr.Jobs {
		switch {
		case j.Share > 0 && j.Share < 0.25:
			n[0]++
		case j.Share >= 0.25 && j.Share < 0.5:
			n[1]++
		case j.Share >= 0.5:
			n[2]++
		case j.GPUs == 1:
			n[3]++
		default:
			n[4]++
		}
	}
	for k, b := range PAIRequestMix {
		if got := float64(n[k]) / 20000; got < b.Share-0.015 || got > b.Share+0.015 {
			t.Errorf("bucket %d: share %.3f, want %.3f", k, got, b.Share)
		}
	}
	if err := tr.Normalise(); err != nil {
		t.Fatalf("the mixed list is not a valid trace: %v", err)
	}
}
