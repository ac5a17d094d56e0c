//go:build !(linux || darwin)

package daemon

// openFileLimit: no limit known on this platform.
func openFileLimit() (uint64, error) { return 0, errNoLimit }
