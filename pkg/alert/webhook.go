package alert

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/heartbeat"
)

// Headers of a webhook request.
const (
	// HeaderEventID carries the audit event's id: the same on every
	// re-delivery, so a receiver can drop duplicates.
	HeaderEventID = "X-MCPD-Event-ID"
	// HeaderSignature carries "sha256=" and the hex HMAC-SHA256 of the body,
	// keyed with the webhook secret, when one is set.
	HeaderSignature = "X-MCPD-Signature"
)

// Webhook posts each alert's audit event, as JSON, to one URL.
type Webhook struct {
	url    string
	name   string
	secret []byte
	client *http.Client
}

// NewWebhook returns the destination for url; a non-empty secret signs every
// body. A nil client is NewHTTPClient().
func NewWebhook(url string, secret []byte, client *http.Client) (*Webhook, error) {
	label, err := destinationLabel(url)
	if err != nil {
		return nil, fmt.Errorf("webhook url: %w", err)
	}
	if client == nil {
		client = NewHTTPClient()
	}
	return &Webhook{url: url, name: "webhook:" + label, secret: bytes.Clone(secret), client: client}, nil
}

// Name is "webhook:" and the URL without its password or query.
func (w *Webhook) Name() string { return w.name }

// Payload is a webhook's body: the audit event as the API shapes it, plus
// the tenant it belongs to.
type Payload struct {
	heartbeat.Event
	TenantID uuid.UUID `json:"tenant_id"`
}

// Sign returns the value of the X-MCPD-Signature header for body.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify reports whether signature (an X-MCPD-Signature value) is body's,
// comparing in constant time.
func Verify(secret, body []byte, signature string) bool {
	got, ok := strings.CutPrefix(signature, "sha256=")
	if !ok {
		return false
	}
	want := Sign(secret, body)[len("sha256="):]
	return hmac.Equal([]byte(got), []byte(want))
}

// Send posts one request per alert that has an event, in order, and stops
// at the first that fails. Alerts without an event (re-sends) are passed.
func (w *Webhook) Send(ctx context.Context, alerts []Alert) (int, error) {
	for i, al := range alerts {
		if al.Event == nil {
			continue
		}
		if err := w.post(ctx, *al.Event); err != nil {
			return i, err
		}
	}
	return len(alerts), nil
}

func (w *Webhook) post(ctx context.Context, ev heartbeat.Event) error {
	b, err := json.Marshal(Payload{Event: ev, TenantID: ev.TenantID})
	if err != nil {
		return &DeliveryError{Alerts: 1, Err: fmt.Errorf("encode: %w", err)}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(b))
	if err != nil {
		return &DeliveryError{Alerts: 1, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent())
	req.Header.Set(HeaderEventID, ev.EventID.String())
	if len(w.secret) > 0 {
		req.Header.Set(HeaderSignature, Sign(w.secret, b))
	}
	return do(w.client, req, 1)
}
