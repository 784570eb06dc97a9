package trace

import (
	"io"
)

// ReadTiresias reads the Tiresias simulator's job file (header
// job_id,num_gpu,submit_time,iterations,model_name,duration,interval);
// submit_time and duration are in seconds. iterations and interval are not
// used: duration already says how long the job runs.
func ReadTiresias(r io.Reader) (*Trace, error) {
	t := &Trace{}
	err := ReadCSV(r, []string{"job_id", "num_gpu", "submit_time", "duration"}, func(row *Row) error {
		t.Jobs = append(t.Jobs, Job{ID: row.ID("job_id"), GPUs: row.Int("num_gpu"),
			Submit: row.Float("submit_time"), Duration: row.Float("duration"), Model: row.Field("model_name")})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, t.Normalise()
}
