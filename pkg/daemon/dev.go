package daemon

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/auth"
)

// Dev mode's demo tenant token.
const (
	devScope    = auth.ScopeRead + " " + auth.ScopeWrite
	devTokenTTL = 24 * time.Hour
	devSubject  = "mcpd-dev"
)

// writeDevSecret makes a random HS256 secret and writes it to a new 0600
// file in the temporary directory, whose path it returns.
func writeDevSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("dev secret: %w", err)
	}
	f, err := os.CreateTemp("", "mcpd-dev-secret-*.key") // mode 0600
	if err != nil {
		return "", fmt.Errorf("dev secret: %w", err)
	}
	_, werr := f.WriteString(base64.RawURLEncoding.EncodeToString(b[:]) + "\n")
	cerr := f.Close()
	if werr != nil || cerr != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("dev secret: write %s: %v %v", f.Name(), werr, cerr)
	}
	return f.Name(), nil
}

// devBanner is what --dev prints once listening: a token for a demo tenant
// and the lines to try.
type devBanner struct {
	secretFile string
	tenant     uuid.UUID
	token      string
	expires    time.Time
	generated  bool   // the secret file is this run's own, removed on exit
	board      bool   // the web board is served at /ui/
	public     bool   // the tenant is the public tenant of /v0.1
	mcpctl     string // how to run mcpctl where mcpd was started (mcpctlCommand)
}

// mcpctlCommand is how the banner tells to run mcpctl, as it works where
// mcpd was started (exe its executable, dir the working directory,
// lookPath exec.LookPath): from go run (mcpd's executable in the build
// cache) in a clone, "go run ./cmd/mcpctl", as the README does; else
// "mcpctl" when it is on the PATH; else the mcpctl beside mcpd's executable
// (make build's bin/mcpctl, as ./bin/mcpctl from the clone); else, in a
// clone, "go run ./cmd/mcpctl"; else "mcpctl".
func mcpctlCommand(exe, dir string, lookPath func(string) (string, error)) string {
	clone := isDir(filepath.Join(dir, "cmd", "mcpctl"))
	if clone && strings.Contains(filepath.ToSlash(exe), "/go-build") {
		return "go run ./cmd/mcpctl"
	}
	if _, err := lookPath("mcpctl"); err == nil {
		return "mcpctl"
	}
	if exe != "" {
		sibling := filepath.Join(filepath.Dir(exe), "mcpctl")
		if fi, err := os.Stat(sibling); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			if rel, err := filepath.Rel(dir, sibling); err == nil && !strings.HasPrefix(rel, "..") {
				return "./" + filepath.ToSlash(rel)
			}
			return sibling
		}
	}
	if clone {
		return "go run ./cmd/mcpctl"
	}
	return "mcpctl"
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// startedMcpctlCommand is mcpctlCommand for this process.
func startedMcpctlCommand() string {
	exe, _ := os.Executable()
	dir, _ := os.Getwd()
	return mcpctlCommand(exe, dir, exec.LookPath)
}

// newDevBanner issues the demo token: for the tenant given, the public
// tenant of /v0.1 when there is one, so that what the demo registers is
// what registry clients list; else a new tenant.
func newDevBanner(secretFile string, tenant uuid.UUID, now time.Time) (*devBanner, error) {
	secret, err := auth.ReadSecretFile(secretFile)
	if err != nil {
		return nil, fmt.Errorf("dev token: %w", err)
	}
	public := tenant != uuid.Nil
	if !public {
		tenant = uuid.New()
	}
	token, err := auth.Issue(secret, tenant, devSubject, devScope, devTokenTTL, now)
	if err != nil {
		return nil, fmt.Errorf("dev token: %w", err)
	}
	return &devBanner{secretFile: secretFile, tenant: tenant, token: token, expires: now.Add(devTokenTTL).UTC(),
		public: public}, nil
}

func (b *devBanner) print(w io.Writer, baseURL string) {
	note := ""
	if b.generated {
		note = ", removed on exit"
	}
	mcpctl := b.mcpctl
	if mcpctl == "" {
		mcpctl = "mcpctl"
	}
	boardLine := ""
	if b.board {
		boardLine = "  board        " + baseURL + "/ui/ (paste the token to sign in)\n"
	}
	if b.public {
		boardLine += "  registry     " + baseURL + "/v0.1/servers (no token needed: --registry-public-tenant)\n"
	}
	fmt.Fprintf(w, `mcpd is running in dev mode: in-memory store, nothing is kept after it stops.

  API          %[1]s
%[8]s  secret file  %[2]s (HS256%[7]s)
  tenant       %[3]s
  token        %[4]s
               (scope "%[5]s", expires %[6]s)

Try it:

  export MCPCTL_SERVER=%[1]s
  export MCPCTL_TOKEN=%[4]s
  %[9]s register --module calendar --version 1.3.2 --protocol 2025-06-18 --skill search
  %[9]s servers list
  %[9]s watch
  %[9]s token issue --tenant %[3]s --scope "%[5]s" --secret-file %[2]s

  curl -s -X POST %[1]s/v1/mcp/servers/register \
    -H "Authorization: Bearer $MCPCTL_TOKEN" -H 'Content-Type: application/json' \
    -d '{"module_name":"calendar","version":"1.3.2","supported_protocols":["2025-06-18"],"skills":[{"name":"search"}]}'
  curl -s -X POST %[1]s/v1/mcp/servers/heartbeat \
    -H "Authorization: Bearer $MCPCTL_TOKEN" -H 'Content-Type: application/json' \
    -d '{"server_id":"SERVER_ID"}'
  curl -s -H "Authorization: Bearer $MCPCTL_TOKEN" %[1]s/v1/mcp/servers

`, baseURL, b.secretFile, b.tenant, b.token, devScope, b.expires.Format(time.RFC3339), note, boardLine, mcpctl)
}

// devCursorKey derives the cursor key of mcpd --dev from the operator's
// JWT secret file or, without one, its JWKS file: tokens then outlive a
// restart, and so must cursors, so that a cursor of the previous process,
// whose memory trail is gone, opens and is answered 410 (list again)
// rather than 400. A JWKS holds public keys only: cursors sealed under a
// key derived from it are still bound to their tenant and checked, but not
// secret, which --dev (one process, a demo trail) can afford.
func devCursorKey(secretFile, jwksFile string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) {
		var material []byte
		var err error
		if secretFile != "" {
			material, err = auth.ReadSecretFile(secretFile)
		} else {
			material, err = os.ReadFile(jwksFile)
		}
		if err != nil {
			return nil, err
		}
		mac := hmac.New(sha256.New, material)
		mac.Write([]byte("mcpd --dev cursor key"))
		return mac.Sum(nil), nil
	}
}
