//go:build !(linux || darwin)

package daemon

import "errors"

// errNoLimit: the platform has no open-file limit to check.
var errNoLimit = errors.New("no open-file limit")

// openFileLimit: no limit known on this platform.
func openFileLimit() (uint64, error) { return 0, errNoLimit }
