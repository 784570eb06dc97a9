package sim

import (
	"io"
)

// ReadTiresias reads the Tiresias simulator's job file (header
// job_id,num_gpu,submit_time,iterations,model_name,duration,interval);
// submit_time and duration are in seconds. iterations and interval are not
// used: duration already says how long the job runs.
func ReadTiresias(r io.Reader) (*Trace, error) {
	t := &Trace{}
	err := readRows(r, []string{"job_id", "num_gpu", "submit_time", "duration"}, func(row *row) error {
		t.Jobs = append(t.Jobs, Job{ID: row.id("job_id"), GPUs: row.int("num_gpu"),
			Submit: row.float("submit_time"), Duration: row.float("duration"), Model: row.field("model_name")})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, t.normalise()
}
