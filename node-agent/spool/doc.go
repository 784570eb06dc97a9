// Package spool is the node agent's own SQLite file (WAL mode): the
// profiling runs it started, every measurement as it is taken, and every
// finished profile with its delivery state.
//
// Writing first and sending second is what makes delivery safe: a profile
// stays pending, surviving agent restarts and controller outages, until the
// controller acknowledges it; then it is marked delivered, never deleted, so
// an admin can see what was sent and when. The controller stores a record
// once per ID, so a profile sent twice (the ack lost on the way back) is
// still stored once.
package spool
