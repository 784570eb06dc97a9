// Package trace is the simulator's input: a Trace of Jobs, the readers of
// the trace formats (Philly, Tiresias, Lachesis's job list, Slurm
// accounting), the generator of Synergy's synthetic job lists, and ReadCSV,
// the column-addressed CSV reader the simulator's other input tables use.
// It needs nothing of the engine (package sim), which runs what it reads.
package trace
