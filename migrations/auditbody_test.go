package migrations_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The audit event's body is built in one place: mcp_audit_body (0013).
// schema.sql is the schema after every migration (kept fresh by
// TestSchemaSQLUpToDate), and pkg/pgstore's statements call the function.
func TestAuditBodyHasOneDefinition(t *testing.T) {
	schema, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(schema), "'skills_affected'"); n != 1 {
		t.Fatalf("schema.sql builds an audit body in %d places, want 1 (mcp_audit_body)", n)
	}
	files, err := filepath.Glob("../pkg/pgstore/*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "'skills_affected'") {
			t.Fatalf("%s builds an audit body itself; call mcp_audit_body", f)
		}
	}
}
