// Package progress draws a profiling run's progress for the
// lachesis-profiler CLI: on a terminal, one line redrawn in place with a
// bar over the sweep's points, the last measurement, the time elapsed and
// an ETA; elsewhere (a log, a pipe) one plain line per message.
package progress
