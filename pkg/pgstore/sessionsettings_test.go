package pgstore_test

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/pgsession"
	"github.com/cyberos/mcpd/pkg/pgstore"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
)

// On Citus mcpd's sessions run distributed statements over one connection
// per worker (pgsession.CitusExecutorPoolSize), on the coordinator and on
// the workers it reads directly, unless the operator set the executor's
// pool size; on plain PostgreSQL nothing is set.
func TestSessionSettings(t *testing.T) {
	const setting = "citus.max_adaptive_executor_pool_size"
	show := func(t *testing.T, databaseURL string) *string {
		t.Helper()
		pool, err := pgstore.Connect(t.Context(), databaseURL)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		var v *string
		if err := pool.QueryRow(t.Context(), `SELECT current_setting($1, true)`, setting).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	withOption := func(t *testing.T, databaseURL, option string) string {
		t.Helper()
		// A space as %20: the driver does not read "+" as one.
		return pgtest.WithQuery(t, databaseURL, "options="+strings.ReplaceAll(url.QueryEscape("-c "+setting+"="+option), "+", "%20"))
	}
	want := strconv.Itoa(pgsession.CitusExecutorPoolSize)

	t.Run("citus", func(t *testing.T) {
		c := pgtest.SharedCitus(t)
		db := c.NewDB(t)
		if v := show(t, db.AppURL); v == nil || *v != want {
			t.Fatalf("%s in a session of pgstore.Connect on the coordinator: %v, want %s", setting, deref(v), want)
		}
		appURL, err := url.Parse(db.AppURL)
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range c.Workers {
			u, err := url.Parse(w.URL("", db.Name))
			if err != nil {
				t.Fatal(err)
			}
			u.User = appURL.User
			if v := show(t, u.String()); v == nil || *v != want {
				t.Fatalf("%s in a session of pgstore.Connect on worker %d: %v, want %s", setting, i, deref(v), want)
			}
		}
		if v := show(t, withOption(t, db.AppURL, "4")); v == nil || *v != "4" {
			t.Fatalf("%s set by the connection's options to 4: %v in the session", setting, deref(v))
		}
	})
	t.Run("plain", func(t *testing.T) {
		db := pgtest.NewDB(t)
		if v := show(t, db.AppURL); v != nil {
			t.Fatalf("%s in a session on plain PostgreSQL: %q, want no such setting", setting, *v)
		}
	})
}

func deref(v *string) string {
	if v == nil {
		return "<not set>"
	}
	return *v
}
