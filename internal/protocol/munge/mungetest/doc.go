// Package mungetest supports tests of code that signs or verifies munge
// credentials: Fake, an in-memory Signer and Verifier with munged's replay
// rule, and StartMunged, a private munged with its own key.
package mungetest
