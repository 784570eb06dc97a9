// Package config reads and validates Lachesis's one YAML file (lachesis.yaml,
// next to slurm.conf). It is parsed from an io.Reader with viper, checked
// once, and handed to the rest of the core as a plain struct: nothing on the
// hot path looks at YAML or re-validates.
//
// Unknown keys are errors (a typo must not silently fall back to a default),
// and every error names the key it is about, so an admin reading slurmctld's
// log knows which line to fix.
package config
