// Package toolhive tests mcpd with ToolHive's own registry client (the
// github.com/stacklok/toolhive/pkg/registry package that thv runs behind
// "thv config set-registry URL" and "thv registry list"). It is a module
// of its own so that ToolHive's dependencies stay out of mcpd's go.mod and
// binaries; it has no code but its test.
package toolhive
