package sim

import (
	"io"
)

// ReadTiresias reads the Tiresias simulator's job file (header
// job_id,num_gpu,submit_time,iterations,model_name,duration,interval);
// submit_time and duration are in seconds. iterations and interval are not
// used: duration already says how long the job runs.
func ReadTiresias(r io.Reader) (*Trace, error) {
	tab, err := newTable(r, []string{"job_id", "num_gpu", "submit_time", "duration"})
	if err != nil {
		return nil, err
	}
	t := &Trace{}
	for {
		rec, line, err := tab.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		id, err := parseID(line, "job_id", tab.field(rec, "job_id"))
		if err != nil {
			return nil, err
		}
		gpus, err := parseInt(line, "num_gpu", tab.field(rec, "num_gpu"))
		if err != nil {
			return nil, err
		}
		submit, err := parseFloat(line, "submit_time", tab.field(rec, "submit_time"))
		if err != nil {
			return nil, err
		}
		dur, err := parseFloat(line, "duration", tab.field(rec, "duration"))
		if err != nil {
			return nil, err
		}
		t.Jobs = append(t.Jobs, Job{ID: id, Submit: submit, GPUs: gpus, Duration: dur,
			Model: tab.field(rec, "model_name")})
	}
	return t, t.normalise()
}
