package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/auth"
)

func newCmdToken(f *Factory) *cobra.Command {
	cmd := newGroupCmd("token", "Issue API tokens")
	cmd.AddCommand(newCmdTokenIssue(f, nil))
	return cmd
}

type tokenIssueOptions struct {
	IO  *IOStreams
	Now func() time.Time

	TenantFlag string
	Scope      string
	SecretFile string
	TTL        time.Duration
	Subject    string

	// Filled from the flags by the command before it runs.
	Tenant uuid.UUID
	Secret []byte
}

// DefaultTokenTTL is how long an issued token is valid by default.
const DefaultTokenTTL = time.Hour

func newCmdTokenIssue(f *Factory, runF func(*tokenIssueOptions) error) *cobra.Command {
	opts := &tokenIssueOptions{IO: f.IOStreams, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "issue --tenant UUID --scope SCOPES --secret-file FILE [flags]",
		Short: "Issue an HS256 token for a tenant",
		Long: `Issue an HS256 JWT signed with the shared secret that mcpd verifies with
--auth-jwt-secret-file, carrying tenant_id, sub, scope and exp. The token
alone is printed on stdout, so that it can be captured:

  export MCPCTL_TOKEN=$(mcpctl token issue --tenant ... --scope "mcp:read mcp:write" --secret-file /etc/mcpd/jwt.secret)

Scopes: mcp:read allows every GET; mcp:write allows register, heartbeat and
deregister, and every GET. The secret file must hold at least 32 bytes.`,
		Example: `  mcpctl token issue --tenant 0b6e3c1a-2f4d-4e5b-8a9c-7d6e5f4a3b2c --scope "mcp:read mcp:write" \
      --secret-file /etc/mcpd/jwt.secret --ttl 24h --subject ci`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			tenant, err := uuid.Parse(opts.TenantFlag)
			if err != nil || tenant == uuid.Nil || len(opts.TenantFlag) != 36 {
				return usagef("invalid --tenant %q: want a non-nil UUID", opts.TenantFlag)
			}
			opts.Tenant = tenant
			scopes := strings.Fields(opts.Scope)
			if len(scopes) == 0 {
				return usagef("--scope is empty: want mcp:read, mcp:write or both")
			}
			for _, s := range scopes {
				if s != auth.ScopeRead && s != auth.ScopeWrite {
					return usagef("invalid scope %q: want %s or %s", s, auth.ScopeRead, auth.ScopeWrite)
				}
			}
			opts.Scope = strings.Join(scopes, " ")
			if opts.TTL < time.Second {
				return usagef("invalid --ttl %s: want at least 1s", opts.TTL)
			}
			secret, err := readSecret(opts.SecretFile)
			if err != nil {
				return err
			}
			opts.Secret = secret
			if runF != nil {
				return runF(opts)
			}
			return failed(tokenIssueRun(cmd.Context(), opts))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.TenantFlag, "tenant", "", "tenant UUID the token acts for")
	fl.StringVar(&opts.Scope, "scope", "", `space-separated scopes, e.g. "mcp:read mcp:write"`)
	fl.StringVar(&opts.SecretFile, "secret-file", "", "file holding the HS256 secret (at least 32 bytes)")
	fl.DurationVar(&opts.TTL, "ttl", DefaultTokenTTL, "how long the token is valid")
	fl.StringVar(&opts.Subject, "subject", "mcpctl", "the token's sub claim")
	_ = cmd.MarkFlagRequired("tenant")
	_ = cmd.MarkFlagRequired("scope")
	_ = cmd.MarkFlagRequired("secret-file")
	_ = cmd.RegisterFlagCompletionFunc("scope", fixedCompletions(auth.ScopeRead, auth.ScopeWrite, auth.ScopeRead+" "+auth.ScopeWrite))
	return cmd
}

// readSecret reads the HS256 secret of --secret-file as mcpd reads its
// --auth-jwt-secret-file (trailing line endings trimmed). A file that cannot
// be read, or holds a secret too short, is bad usage.
func readSecret(path string) ([]byte, error) {
	b, err := readFlagFile("secret-file", path, maxSecretFileBytes)
	if err != nil {
		return nil, err
	}
	secret := strings.TrimRight(string(b), "\r\n")
	if len(secret) < auth.MinSecretBytes {
		return nil, usagef("--secret-file %s: the secret has %d bytes, want at least %d", path, len(secret), auth.MinSecretBytes)
	}
	return []byte(secret), nil
}

// maxSecretFileBytes bounds what --secret-file reads, as mcpd bounds it.
const maxSecretFileBytes = 1 << 20

func tokenIssueRun(_ context.Context, opts *tokenIssueOptions) error {
	secret := opts.Secret
	if secret == nil {
		var err error
		if secret, err = readSecret(opts.SecretFile); err != nil {
			return err
		}
	}
	tok, err := auth.Issue(secret, opts.Tenant, opts.Subject, opts.Scope, opts.TTL, opts.Now())
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(opts.IO.Out, tok)
	return err
}
