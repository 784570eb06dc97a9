// Package munge binds libmunge, the credential service Slurm itself
// authenticates with, so node agents and the core prove who they are the
// way slurmd and slurmctld do.
//
// Encode asks munged for a credential over a payload; Decode asks munged to
// check one and returns the payload and the uid/gid of the process that
// made it. munged refuses an expired, replayed, rewound or foreign-key
// credential; those refusals map to the sentinel errors of this package, all
// wrapping ErrMunge.
//
// The socket comes from Slurm's AuthInfo (SocketFromAuthInfo), so the core
// uses the munged slurmctld uses. Without cgo the package builds, and every
// call fails with ErrNoCgo.
//
// Signer and Verifier are the seams the agent and the server depend on;
// package mungetest fakes them for unit tests.
package munge
