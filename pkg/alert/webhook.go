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
	"time"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
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
	registry.Event
	TenantID uuid.UUID `json:"tenant_id"`
}

// Kinds of a skill outage's webhook body.
const (
	KindSkillUnavailable = "mcp.skill.unavailable"
	KindSkillAvailable   = "mcp.skill.available"
)

// SkillPayload is a webhook's body for a skill outage alert: raised
// (kind mcp.skill.unavailable, status firing) when no skill of the name is
// available in the tenant any more, resolved (mcp.skill.available) when
// one is again.
type SkillPayload struct {
	EventID   uuid.UUID `json:"event_id"`
	Kind      string    `json:"kind"`
	AlertName string    `json:"alertname"`
	Status    string    `json:"status"` // "firing" or "resolved"
	Severity  string    `json:"severity"`
	TenantID  uuid.UUID `json:"tenant_id"`
	Skill     string    `json:"skill"`
	// StartsAt is when the outage began.
	StartsAt time.Time `json:"starts_at"`
	// EndsAt is when it ended; null while firing.
	EndsAt *time.Time `json:"ends_at"`
	// Labels are the alert's labels at Alertmanager: alertname, tenant_id,
	// skill and severity.
	Labels map[string]string `json:"labels"`
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

// Send posts one request per alert that has an event, and one per raise or
// resolution of a skill outage, in order, and stops at the first that
// fails. Other alerts (re-sends, mass losses) are passed.
func (w *Webhook) Send(ctx context.Context, alerts []Alert) (int, error) {
	for i, al := range alerts {
		var err error
		switch {
		case al.Skill != nil && !al.Skill.Resend:
			err = w.post(ctx, skillPayload(al), al.Skill.ID)
		case al.Event != nil:
			err = w.post(ctx, Payload{Event: *al.Event, TenantID: al.Event.TenantID}, al.Event.EventID)
		}
		if err != nil {
			return i, err
		}
	}
	return len(alerts), nil
}

func skillPayload(al Alert) SkillPayload {
	p := SkillPayload{
		EventID: al.Skill.ID, Kind: KindSkillUnavailable, AlertName: AlertNameSkill, Status: "firing",
		Severity: Severity, TenantID: al.TenantID, Skill: al.Skill.Skill, StartsAt: al.StartsAt.UTC(),
		Labels: map[string]string{
			"alertname": AlertNameSkill, "tenant_id": al.TenantID.String(), "skill": al.Skill.Skill, "severity": Severity,
		},
	}
	if !al.Firing {
		end := al.EndsAt.UTC()
		p.Kind, p.Status, p.EndsAt = KindSkillAvailable, "resolved", &end
	}
	return p
}

func (w *Webhook) post(ctx context.Context, body any, id uuid.UUID) error {
	b, err := json.Marshal(body)
	if err != nil {
		return &DeliveryError{Alerts: 1, Err: fmt.Errorf("encode: %w", err)}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(b))
	if err != nil {
		return &DeliveryError{Alerts: 1, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent())
	req.Header.Set(HeaderEventID, id.String())
	if len(w.secret) > 0 {
		req.Header.Set(HeaderSignature, Sign(w.secret, b))
	}
	return do(w.client, req, 1)
}
