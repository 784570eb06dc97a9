package trace

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestReadPhilly_WholeTrace(t *testing.T) {
	ph := philly(t)
	if len(ph.Jobs) != 78802 {
		t.Fatalf("%d jobs, want 78802", len(ph.Jobs))
	}
	if want := time.Date(2017, 9, 4, 10, 30, 41, 0, time.UTC); !ph.Start.Equal(want) {
		t.Fatalf("start %v, want %v", ph.Start, want)
	}
	// Row 1 of the file: 2017-10-09 07:01:55, 66 s on 1 GPU, cluster 11cb48.
	for _, j := range ph.Jobs {
		if j.ID == 1 {
			want := Job{ID: 1, Submit: time.Date(2017, 10, 9, 7, 1, 55, 0, time.UTC).Sub(ph.Start).Seconds(),
				GPUs: 1, Duration: 66, Cluster: "11cb48"}
			if j != want {
				t.Fatalf("row 1 = %+v, want %+v", j, want)
			}
		}
	}
}

func TestSelect_WindowClustersSkipAndLimit(t *testing.T) {
	ph := philly(t)
	from := time.Date(2017, 10, 2, 0, 0, 0, 0, time.UTC)
	to := from.Add(7 * 24 * time.Hour)
	week, err := ph.Select(Filter{From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	if len(week.Jobs) != 11208 {
		t.Fatalf("week of 2017-10-02: %d jobs, want 11208", len(week.Jobs))
	}
	if week.Jobs[0].Submit != 0 || week.Start.Before(from) {
		t.Fatalf("selection not rebased: first submit %v, start %v", week.Jobs[0].Submit, week.Start)
	}
	vc, err := ph.Select(Filter{Clusters: []string{"7f04ca"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(vc.Jobs) != 723 {
		t.Fatalf("cluster 7f04ca: %d jobs, want 723", len(vc.Jobs))
	}
	part, err := ph.Select(Filter{Skip: 10, Limit: 5, DurationScale: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(part.Jobs) != 5 || part.Jobs[0].ID != ph.Jobs[10].ID || part.Jobs[0].Duration != 2*ph.Jobs[10].Duration {
		t.Fatalf("skip/limit/scale: got %+v", part.Jobs[0])
	}
	if _, err := (&Trace{Name: "rel", Jobs: []Job{{ID: 1, GPUs: 1, Duration: 1}}}).Select(Filter{From: from}); !errors.Is(err, ErrBadTrace) {
		t.Fatalf("wall-clock window on a relative trace: err = %v, want ErrBadTrace", err)
	}
}

func TestReadTiresias_SixtyJobs(t *testing.T) {
	tr, err := Load(refData(t, "tiresias/60_job.csv"), FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	gpus := map[int]int{}
	for _, j := range tr.Jobs {
		gpus[j.GPUs]++
	}
	if len(tr.Jobs) != 60 || gpus[1] != 30 || gpus[2] != 10 || gpus[4] != 10 || gpus[8] != 10 {
		t.Fatalf("%d jobs by GPUs %v, want 60 = 30×1 + 10×2 + 10×4 + 10×8", len(tr.Jobs), gpus)
	}
	if j := tr.Jobs[0]; j.ID != 0 || j.Duration != 164 || j.Model != "vgg19" {
		t.Fatalf("first job %+v", j)
	}
}

func TestReadJobList_SampleSortsAndKeepsModels(t *testing.T) {
	tr, err := Load("testdata/joblist_sample.csv", FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{ID: 1, Submit: 0, GPUs: 1, Duration: 3600, Model: "res18"},
		{ID: 2, Submit: 10, GPUs: 2, Duration: 60, Model: "gnmt"},
		{ID: 3, Submit: 30.5, GPUs: 4, Duration: 7200},
	}
	if len(tr.Jobs) != len(want) {
		t.Fatalf("got %+v", tr.Jobs)
	}
	for i := range want {
		if tr.Jobs[i] != want[i] {
			t.Fatalf("job %d = %+v, want %+v", i, tr.Jobs[i], want[i])
		}
	}
}

func TestReadJobList_WallClockTimes(t *testing.T) {
	in := "job_id,submit_time,gpus,duration\n5,2024-05-01T10:00:30Z,1,10\n6,2024-05-01 10:00:00,2,20\n"
	tr, err := Read(strings.NewReader(in), "wall", FormatJobList)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Jobs[0].ID != 6 || tr.Jobs[1].Submit != 30 || !tr.Start.Equal(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("got %+v from %v", tr.Jobs, tr.Start)
	}
}

func TestReadTrace_RejectsBadInput(t *testing.T) {
	cases := map[string]string{
		"duplicate id":      "job_id,submit_time,gpus,duration\n1,0,1,10\n1,5,1,10\n",
		"zero GPUs":         "job_id,submit_time,gpus,duration\n1,0,0,10\n",
		"zero duration":     "job_id,submit_time,gpus,duration\n1,0,1,0\n",
		"missing column":    "job_id,submit_time,duration\n1,0,10\n",
		"mixed time kinds":  "job_id,submit_time,gpus,duration\n1,0,1,10\n2,2024-05-01T00:00:00,1,10\n",
		"id not a number":   "job_id,submit_time,gpus,duration\nx,0,1,10\n",
		"fractional GPUs":   "job_id,submit_time,gpus,duration\n1,0,1.5,10\n",
		"no jobs":           "job_id,submit_time,gpus,duration\n",
		"negative id":       "job_id,submit_time,gpus,duration\n-1,0,1,10\n",
		"id beyond 32 bits": "job_id,submit_time,gpus,duration\n4294967296,0,1,10\n",
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Read(strings.NewReader(in), name, FormatJobList); !errors.Is(err, ErrBadTrace) {
				t.Fatalf("err = %v, want ErrBadTrace", err)
			}
		})
	}
}

func TestSniff_RecognisesEveryFormat(t *testing.T) {
	cases := map[string]Format{
		"timestamp,duration,num_gpus,gpu_time,cluster\n":                     FormatPhilly,
		"job_id,num_gpu,submit_time,iterations,model_name,duration,interval": FormatTiresias,
		"# comment\njob_id,submit_time,gpus,duration\n":                      FormatJobList,
		"1001|train|2024-05-01T08:00:00|":                                    FormatSacct,
	}
	for head, want := range cases {
		if got := sniff([]byte(head)); got != want {
			t.Errorf("sniff(%q) = %s, want %s", head, got, want)
		}
	}
}

func TestLoadTrace_MissingFileIsAnError(t *testing.T) {
	if _, err := Load("testdata/no-such-file.csv", FormatAuto); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want ErrNotExist", err)
	}
}
