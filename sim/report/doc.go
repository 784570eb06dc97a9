// Package report writes what simulations return (package sim's Results and
// sweep rows) for people and scripts: tables, Markdown, CSV, JSON, the
// headline ratios and JCT CDF charts. The engine does not need it, so it
// links no chart code.
package report
