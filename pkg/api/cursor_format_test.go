package api_test

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"strings"
	"testing"
)

// oldPositionCursor seals a position cursor as builds before per-tenant
// positions made it: kind 'p', then the epoch (a timeline), the
// transaction id and the sequence, each 8 bytes big-endian, AES-256-GCM
// with the tenant as associated data.
func oldPositionCursor(t *testing.T, key []byte, tenant [16]byte, epoch, txid, seq uint64) string {
	t.Helper()
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte{'p'}
	payload = binary.BigEndian.AppendUint64(payload, epoch)
	payload = binary.BigEndian.AppendUint64(payload, txid)
	payload = binary.BigEndian.AppendUint64(payload, seq)
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, payload, tenant[:]))
}

// A cursor of the transaction-id positions (an event's and a horizon's),
// kept by a client across the upgrade, answers 410 cursor-expired once,
// never 400 or 500: the client lists again and watches from the list.
func TestOldFormatCursorExpired(t *testing.T) {
	key := []byte(strings.Repeat("c", 32))
	w := startWatchServer(t, key, 0)
	w.register(t, "alpha", 0, 0)
	for _, cursor := range []string{
		oldPositionCursor(t, key, w.tenant, 1, 7_400_123, 42), // an event's position
		oldPositionCursor(t, key, w.tenant, 1, 7_400_123, 0),  // a horizon
	} {
		for _, c := range []struct {
			path   string
			header map[string]string
		}{
			{"/v1/mcp/watch?cursor=" + cursor, nil},
			{"/v1/mcp/watch", map[string]string{"Last-Event-ID": cursor}},
			{"/v1/mcp/audit?cursor=" + cursor, nil},
		} {
			resp := w.get(t, c.path, c.header)
			if p := problemOf(t, resp); resp.StatusCode != http.StatusGone || !strings.HasSuffix(p.Type, "/cursor-expired") {
				t.Fatalf("%s: %d %+v, want 410 cursor-expired", c.path, resp.StatusCode, p)
			}
		}
	}
	// The list's cursor works after it.
	resp := w.get(t, "/v1/mcp/audit", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("audit list: %d", resp.StatusCode)
	}
}
