package board

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

//go:embed assets
var assets embed.FS

// Prefix is the path the board is served under.
const Prefix = "/ui/"

// ContentSecurityPolicy is sent with every answer of the board: its own
// origin only, no inline script or style, never framed, forms posted to
// itself only.
const ContentSecurityPolicy = "default-src 'self'; base-uri 'none'; form-action 'self'; " +
	"frame-ancestors 'none'; object-src 'none'"

// asset is one embedded file, ready to serve.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// loadAssets reads the embedded files once.
var loadAssets = sync.OnceValue(func() map[string]asset {
	out := map[string]asset{}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		out[strings.TrimPrefix(p, "assets/")] = asset{body: b, contentType: ct,
			etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		panic("board: embedded assets: " + err.Error()) // the build embedded them: cannot happen
	}
	return out
})

// Handler serves the board's files under Prefix (GET and HEAD), each with
// the security headers; Prefix itself is the page.
func Handler() http.Handler {
	files := loadAssets()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setHeaders(w.Header())
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		if name == "" {
			name = "index.html"
		}
		a, ok := files[name]
		if !ok || r.URL.Path == Prefix+"index.html" {
			// One address for the page: /ui/ (index.html is not a second one).
			http.Error(w, "404 not found: the board is at "+Prefix, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", a.contentType)
		w.Header().Set("ETag", a.etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
	})
}

// setHeaders sets the headers of every answer of the board.
func setHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	// Revalidate every time (the ETag makes that cheap), so that a new
	// mcpd's board is never mixed with an old one's cached modules.
	h.Set("Cache-Control", "no-cache")
}

// Redirect answers /ui with a redirect to Prefix.
func Redirect() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setHeaders(w.Header())
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
	})
}
