// Package version holds the build's version, set at link time with
// -ldflags "-X github.com/cyberos/mcpd/pkg/version.Version=v1.2.3".
package version

// Version is the release version of this build; "dev" when not set.
var Version = "dev"
