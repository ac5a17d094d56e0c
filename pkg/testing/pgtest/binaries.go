package pgtest

import (
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// errNoBinaries is what a test sees on a machine without PostgreSQL.
var errNoBinaries = errors.New("PostgreSQL server binaries (initdb, pg_ctl) not found: " +
	"install them with `apt-get install postgresql` (Debian/Ubuntu) or set MCPD_TEST_DATABASE_URL")

// binaries are the server programs a cluster runs.
type binaries struct {
	initdb, pgctl string
}

// finder looks for the server programs: on PATH, then in pg_config
// --bindir, then in the newest /usr/lib/postgresql/*/bin. Its fields are
// seams for tests.
type finder struct {
	lookPath func(string) (string, error)
	bindir   func() (string, error) // pg_config --bindir
	glob     string                 // pattern of versioned bin directories
}

func defaultFinder() finder {
	return finder{
		lookPath: exec.LookPath,
		bindir: func() (string, error) {
			p, err := exec.LookPath("pg_config")
			if err != nil {
				return "", err
			}
			out, err := exec.Command(p, "--bindir").Output()
			if err != nil {
				return "", err
			}
			return strings.TrimSpace(string(out)), nil
		},
		glob: "/usr/lib/postgresql/*/bin",
	}
}

func (f finder) find() (binaries, error) {
	if initdb, err := f.lookPath("initdb"); err == nil {
		if pgctl, err := f.lookPath("pg_ctl"); err == nil {
			return binaries{initdb: initdb, pgctl: pgctl}, nil
		}
	}
	if f.bindir != nil {
		if dir, err := f.bindir(); err == nil && dir != "" {
			if b, ok := inDir(dir); ok {
				return b, nil
			}
		}
	}
	dirs, _ := filepath.Glob(f.glob)
	sort.Slice(dirs, func(i, j int) bool {
		return versionLess(filepath.Base(filepath.Dir(dirs[j])), filepath.Base(filepath.Dir(dirs[i])))
	})
	for _, dir := range dirs {
		if b, ok := inDir(dir); ok {
			return b, nil
		}
	}
	return binaries{}, errNoBinaries
}

func inDir(dir string) (binaries, bool) {
	b := binaries{initdb: filepath.Join(dir, "initdb"), pgctl: filepath.Join(dir, "pg_ctl")}
	return b, isExecutable(b.initdb) && isExecutable(b.pgctl)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// versionLess orders PostgreSQL major version directory names ("9.6", "15")
// numerically; names that are not versions sort first.
func versionLess(a, b string) bool {
	pa, pb := versionParts(a), versionParts(b)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return len(pa) < len(pb)
}

func versionParts(s string) []int {
	var parts []int
	for _, f := range strings.Split(s, ".") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil
		}
		parts = append(parts, n)
	}
	return parts
}

// account is who runs the server programs. PostgreSQL refuses to run as
// root, so a root test runs them as nobody.
type account struct {
	uid, gid int
	prefix   []string // the command that switches to the user, or nil
}

func currentAccount() (account, error) {
	if os.Geteuid() != 0 {
		return account{uid: -1, gid: -1}, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return account{}, errors.New("running as root, and PostgreSQL refuses root: no user nobody to run it as")
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return account{}, err
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return account{}, err
	}
	a := account{uid: uid, gid: gid}
	if p, err := exec.LookPath("setpriv"); err == nil {
		a.prefix = []string{p, "--reuid=" + u.Uid, "--regid=" + u.Gid, "--clear-groups", "--"}
	} else if p, err := exec.LookPath("runuser"); err == nil {
		a.prefix = []string{p, "-u", "nobody", "--"}
	} else {
		return account{}, errors.New("running as root, and PostgreSQL refuses root: neither setpriv nor runuser found to run it as nobody")
	}
	return a, nil
}

// chown gives path to the account (a no-op when not root).
func (a account) chown(path string) error {
	if a.prefix == nil {
		return nil
	}
	return os.Chown(path, a.uid, a.gid)
}

// command is name with args, run as the account.
func (a account) command(name string, args ...string) []string {
	return append(append(append([]string(nil), a.prefix...), name), args...)
}
