package localapi

import (
	"errors"

	"github.com/lachesis-sched/lachesis/profile/sensitivity"
	"github.com/lachesis-sched/lachesis/profiler"
)

// Ops a request may ask for.
const (
	OpProfile = "profile"
	OpStatus  = "status"
)

// Request is what the CLI sends, once per connection.
type Request struct {
	Op      string          `json:"op"`
	Profile *ProfileRequest `json:"profile,omitempty"`
	JobEnd  *JobEndRequest  `json:"job_end,omitempty"`
	Report  *ProgressReport `json:"report,omitempty"`
}

// ProfileRequest asks for one model to be profiled with the caller's
// workload. The workload runs as the caller, in Dir, with Env.
type ProfileRequest struct {
	Model        string   `json:"model"`
	Argv         []string `json:"argv"`
	Env          []string `json:"env"`
	Dir          string   `json:"dir"`
	Regex        string   `json:"regex,omitempty"`
	PointSeconds float64  `json:"point_seconds,omitempty"`
	DatasetPath  string   `json:"dataset_path,omitempty"`
	GPUs         int      `json:"gpus,omitempty"`
	MaxCPUs      int      `json:"max_cpus,omitempty"`
	UseNVML      bool     `json:"use_nvml,omitempty"`
	Tolerance    float64  `json:"tolerance,omitempty"`
}

// Event is one line of the agent's answer; exactly one field is set.
type Event struct {
	Progress *profiler.Progress `json:"progress,omitempty"`
	Result   *Result            `json:"result,omitempty"`
	Status   *Status            `json:"status,omitempty"`
	Error    string             `json:"error,omitempty"`
	// JobEnd answers OpJobEnd: the report as spooled.
	JobEnd *JobEndRequest `json:"job_end,omitempty"`
	// Iterations answers OpProgress.
	Iterations *ProgressAnswer `json:"iterations,omitempty"`
}

// Result is the outcome of a profile request.
type Result struct {
	ID     string             `json:"id"`
	Model  string             `json:"model"`
	User   string             `json:"user"`
	Points int                `json:"points"`
	Best   sensitivity.Demand `json:"best"`
	// Delivered says whether the controller had acknowledged the profile
	// when the answer was sent; if not, it waits in the spool.
	Delivered bool `json:"delivered"`
	// Refused is the controller's reason when it refused the profile for
	// good (a quota of lachesis.yaml); the agent does not send it again.
	Refused string `json:"refused,omitempty"`
}

// Status is the agent's state, for `lachesis-profiler status`-like checks.
type Status struct {
	Node       string `json:"node"`
	Controller string `json:"controller"`
	Pending    int    `json:"pending"`
	Delivered  int    `json:"delivered"`
	Telemetry  string `json:"telemetry"`
	Running    string `json:"running,omitempty"` // model being profiled (another user's is not named)
	Queued     int    `json:"queued,omitempty"`  // sweeps waiting for it
}

// Sentinel errors of the client.
var (
	// ErrAgentNotRunning: nothing listens on the socket.
	ErrAgentNotRunning = errors.New("the lachesis node agent is not running")
	// ErrAgent: the agent answered with an error.
	ErrAgent = errors.New("node agent")
	// ErrProtocol: the agent's answer made no sense.
	ErrProtocol = errors.New("node agent protocol error")
)

// maxRequestBytes bounds a request (argv and environment included).
const maxRequestBytes = 4 << 20
