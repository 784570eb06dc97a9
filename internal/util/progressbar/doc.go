// Package progressbar draws progress for Lachesis's command-line tools on a
// terminal: a line redrawn in place (Line), a bar of cells (Bar), a
// counter over a known total that several goroutines may advance (Counter,
// for lachesis-sim), and durations for people (Duration). What a tool shows
// besides (lachesis-profiler's points, readings and messages) stays with
// the tool.
package progressbar
