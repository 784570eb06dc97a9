// Package config reads and validates Lachesis's one YAML file (lachesis.yaml,
// next to slurm.conf). It is parsed from an io.Reader by the shared strict
// loader (internal/util/yamlconf), checked once, and handed to the rest of
// the core as a plain struct: nothing on the hot path looks at YAML or
// re-validates.
//
// The sections' policies own their settings: the tiresias section is a
// priority.Config and the synergy section a synergy.Config, each with its
// own defaults and Validate; this package composes them with the top-level
// keys.
//
// Unknown keys are errors (a typo must not silently fall back to a default),
// and every error names the key it is about, so an admin reading slurmctld's
// log knows which line to fix. A file that sets no key, or is over 1 MiB, is
// an error too, so that `scontrol reconfigure` on an emptied or runaway file
// keeps the config in force instead of resetting it.
package config
