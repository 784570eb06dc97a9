// Package deliver sends the node agent's reports to the Lachesis core in
// slurmctld.
//
// Client makes one report frame per attempt (with a fresh munge
// credential: munged refuses a credential twice) and waits for its ack.
// Deliverer drains the spool's pending profiles through a Client, oldest
// first, and retries with exponential backoff while the controller is down
// or refuses. A profile counts as delivered only when an ack names it;
// an ack saying the controller already had it (Duplicate) counts too, which
// is what makes a lost ack harmless: the retry is stored once, by ID.
package deliver
