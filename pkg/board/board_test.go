package board_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/board"
)

// Every answer of the board carries the security headers; the page and its
// modules come with their types, revalidated by ETag.
func TestHandlerHeaders(t *testing.T) {
	t.Parallel()
	h := board.Handler()
	for _, c := range []struct {
		path, status, ctype string
	}{
		{"/ui/", "200", "text/html; charset=utf-8"},
		{"/ui/app.js", "200", "text/javascript; charset=utf-8"},
		{"/ui/api.js", "200", "text/javascript; charset=utf-8"},
		{"/ui/model.js", "200", "text/javascript; charset=utf-8"},
		{"/ui/board.css", "200", "text/css; charset=utf-8"},
		{"/ui/icon.svg", "200", "image/svg+xml"},
		{"/ui/index.html", "404", "text/plain; charset=utf-8"},
		{"/ui/nope.js", "404", "text/plain; charset=utf-8"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.path, nil))
		res := rec.Result()
		if got := res.Status[:3]; got != c.status || res.Header.Get("Content-Type") != c.ctype {
			t.Errorf("%s: %s %q, want %s %q", c.path, res.Status, res.Header.Get("Content-Type"), c.status, c.ctype)
		}
		want := map[string]string{
			"Content-Security-Policy": board.ContentSecurityPolicy,
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
			"X-Frame-Options":         "DENY",
		}
		for k, v := range want {
			if got := res.Header.Get(k); got != v {
				t.Errorf("%s: %s %q, want %q", c.path, k, got, v)
			}
		}
		if c.status != "200" {
			continue
		}
		etag := res.Header.Get("ETag")
		req := httptest.NewRequest(http.MethodGet, c.path, nil)
		req.Header.Set("If-None-Match", etag)
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if etag == "" || rec.Code != http.StatusNotModified {
			t.Errorf("%s: ETag %q, revalidated %d, want 304", c.path, etag, rec.Code)
		}
	}
	csp := board.ContentSecurityPolicy
	if !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") ||
		strings.Contains(csp, "unsafe") {
		t.Fatalf("CSP %q", csp)
	}
}

// The page holds no inline script, style or event handler, and loads
// nothing from another origin: the CSP would refuse them.
func TestPageHasNothingInline(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	board.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/", nil))
	page, _ := io.ReadAll(rec.Body)
	html := string(page)
	for _, bad := range []string{"<style", " style=", " onclick", " onload", " onsubmit", "http://", "https://", "javascript:"} {
		if strings.Contains(html, bad) {
			t.Errorf("the page contains %q", bad)
		}
	}
	for _, s := range strings.Split(html, "<script")[1:] {
		if !strings.Contains(s[:strings.Index(s, ">")], `src="`) {
			t.Errorf("an inline script: <script%s", s[:strings.Index(s, ">")+1])
		}
	}
	if !strings.Contains(html, `<label for="token">Token</label>`) || !strings.Contains(html, `id="token" name="token" type="password"`) {
		t.Error("no password input labelled Token")
	}
}

func TestRedirect(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	board.Redirect().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui", nil))
	if rec.Code != http.StatusMovedPermanently || rec.Header().Get("Location") != "/ui/" {
		t.Fatalf("/ui: %d %q", rec.Code, rec.Header().Get("Location"))
	}
}

// mcpd serves the board at /ui/ (and redirects /ui) unless --ui=false,
// which leaves both paths 404.
func TestDaemonServesBoardUnlessOff(t *testing.T) {
	_, secretFile := newTenant(t)
	for _, on := range []bool{true, false} {
		cfg := devConfig(secretFile)
		cfg.UI = on
		d, stop := startDaemon(t, cfg, nil)
		hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for path, want := range map[string]int{"/ui/": http.StatusOK, "/ui": http.StatusMovedPermanently, "/ui/app.js": http.StatusOK} {
			res, err := hc.Get("http://" + d.Addr() + path)
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			if !on {
				want = http.StatusNotFound
			}
			if res.StatusCode != want {
				t.Errorf("--ui=%v %s: %d, want %d", on, path, res.StatusCode, want)
			}
			if on && res.Header.Get("Content-Security-Policy") == "" {
				t.Errorf("%s: no Content-Security-Policy", path)
			}
		}
		hc.CloseIdleConnections()
		stop()
	}
}
