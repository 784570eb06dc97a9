// Package config reads the node agent's YAML (etc/node-agent.yaml documents
// every key and its default). Parse takes an io.Reader, fills in defaults,
// rejects unknown keys and validates everything once, so the daemon never
// runs on a half-understood configuration.
package config
