package sim

import "github.com/lachesis-sched/lachesis/sim/trace"

// The engine's input is a trace.Trace: package trace reads and generates
// traces without the engine. These names let a caller of Run, RunAll or
// Sweep keep to one import.
type (
	Job    = trace.Job
	Trace  = trace.Trace
	Filter = trace.Filter
	Format = trace.Format
)

// Trace formats, as trace.Load reads them.
const (
	FormatAuto     = trace.FormatAuto
	FormatPhilly   = trace.FormatPhilly
	FormatTiresias = trace.FormatTiresias
	FormatJobList  = trace.FormatJobList
	FormatSacct    = trace.FormatSacct
)

// ErrBadTrace is trace.ErrBadTrace: wrapped by every error about a trace's
// or an input table's content.
var ErrBadTrace = trace.ErrBadTrace

// LoadTrace is trace.Load.
func LoadTrace(path string, format Format) (*Trace, error) { return trace.Load(path, format) }
