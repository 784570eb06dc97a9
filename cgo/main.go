// Command lachesis_core is built with -buildmode=c-shared into
// liblachesis_core.so, the one Go runtime inside slurmctld that every
// Lachesis plugin links against. See exports.go for the C entry points.
package main

// main is required by -buildmode=c-shared and never runs.
func main() {}
