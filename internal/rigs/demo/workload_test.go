package demo

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestBundledWorkloadsAndModelsParse(t *testing.T) {
	for _, p := range []string{"../../../etc/demo/workload.csv", "../../../etc/demo/synergy-workload.csv"} {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		jobs, err := ParseWorkload(f)
		f.Close()
		if err != nil || len(jobs) < 10 {
			t.Fatalf("%s: %d jobs, %v", p, len(jobs), err)
		}
	}
	f, err := os.Open("../../../etc/demo/models.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	models, err := ParseModels(f)
	if err != nil || models["image"].BestCPUs != 9 || models["language"].BestCPUs != 1 {
		t.Fatalf("models = %+v, %v", models, err)
	}
}

func TestParseWorkload(t *testing.T) {
	cases := []struct {
		name, in string
		ok       bool
	}{
		{"four columns without a model parse", "name,arrival_s,gpus,work_s\na,0,1,10\n", true},
		{"a fifth column names the model", "a,1.5,2,10,image\n", true},
		{"zero GPUs is refused", "a,0,0,10\n", false},
		{"negative arrival is refused", "a,-1,1,10\n", false},
		{"three columns are refused", "a,0,1\n", false},
		{"an empty file is refused", "# nothing\n", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			jobs, err := ParseWorkload(strings.NewReader(c.in))
			if c.ok != (err == nil) {
				t.Fatalf("err = %v, want ok=%v", err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrWorkload) {
				t.Fatalf("error %v does not wrap ErrWorkload", err)
			}
			if c.ok && jobs[len(jobs)-1].Work != 10*time.Second {
				t.Fatalf("jobs = %+v", jobs)
			}
		})
	}
}
