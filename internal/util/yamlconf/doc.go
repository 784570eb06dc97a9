// Package yamlconf is the one strict YAML loader behind Lachesis's config
// files: lachesis.yaml (internal/controller/config, read inside slurmctld)
// and node-agent.yaml (node-agent/config).
//
// Each config package owns its keys, defaults and validation; this package
// owns what they share: a size bound (a config is small, and a huge file
// must not be read into slurmctld's memory), refusing a file that sets no
// key (an emptied file must not silently reset a running cluster to the
// defaults), viper's YAML reading, unknown keys as errors, and error
// messages that name the full key.
package yamlconf
