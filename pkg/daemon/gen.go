package daemon

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra/doc"
)

// manDate is the date the generated man page carries; fixed so that
// generating it twice gives the same file (mcpctl's pages carry the same).
var manDate = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// manExamples are the man page's EXAMPLES.
const manExamples = `  # A demo: in-memory store, a fresh secret, a ready token printed
  mcpd --dev

  # Production: PostgreSQL (migrated with mcpctl migrate up), an HS256 secret
  mcpd --listen 0.0.0.0:8420 --database-url postgres://mcpd@db/mcpd \
       --auth-jwt-secret-file /etc/mcpd/jwt.secret

  # The same settings from the environment (as the systemd unit reads them)
  MCPD_DATABASE_URL=postgres://mcpd@db/mcpd MCPD_AUTH_JWT_SECRET_FILE=/etc/mcpd/jwt.secret mcpd`

// GenMan writes mcpd's man page, mcpd.1, into dir, from the command's flags
// and help: cmd/mcpctl-docs writes it beside mcpctl's pages.
func GenMan(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("mcpd man page: %w", err)
	}
	cmd := NewCommand(io.Discard, io.Discard, nil)
	cmd.DisableAutoGenTag = true
	cmd.InitDefaultVersionFlag()
	// The man page's markdown would take <FLAG> for a tag.
	cmd.Long = strings.ReplaceAll(cmd.Long, "<FLAG>", `\<FLAG\>`)
	cmd.Example = manExamples
	header := &doc.GenManHeader{
		Title:   "MCPD",
		Section: "1",
		Source:  "mcpd",
		Manual:  "mcpd manual",
		Date:    &manDate,
	}
	if err := doc.GenManTree(cmd, header, dir); err != nil {
		return fmt.Errorf("mcpd man page: %w", err)
	}
	return nil
}
