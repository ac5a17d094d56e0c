package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Alertmanager sends alerts to one Prometheus Alertmanager through its v2
// API (POST /api/v2/alerts). For an HA pair, make one per member: each gets
// its own cursor, and Alertmanager deduplicates what both receive.
type Alertmanager struct {
	baseURL  string
	endpoint string
	name     string
	client   *http.Client
	// GeneratorURL, when set, is mcpd's external base URL: each alert links
	// to its server there (GeneratorURL + "/v1/mcp/servers/" + server id),
	// a skill outage to the skill's servers ("/v1/mcp/skills?name=" + name).
	GeneratorURL string
}

var _ Resending = (*Alertmanager)(nil)

// NewAlertmanager returns the destination for the Alertmanager at baseURL
// (scheme, host and any path prefix, without /api/v2). A nil client is
// NewHTTPClient().
func NewAlertmanager(baseURL string, client *http.Client) (*Alertmanager, error) {
	label, err := destinationLabel(baseURL)
	if err != nil {
		return nil, fmt.Errorf("alertmanager url: %w", err)
	}
	if client == nil {
		client = NewHTTPClient()
	}
	base := strings.TrimRight(baseURL, "/")
	return &Alertmanager{baseURL: base, endpoint: base + "/api/v2/alerts", name: "alertmanager:" + label, client: client}, nil
}

// Name is "alertmanager:" and the URL without its password or query.
func (a *Alertmanager) Name() string { return a.name }

// ResendsFiring is true: Alertmanager resolves an alert whose EndsAt passes.
func (a *Alertmanager) ResendsFiring() bool { return true }

// PostableAlert is one alert as Alertmanager's v2 API takes it.
type PostableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt,omitzero"`
	EndsAt       time.Time         `json:"endsAt,omitzero"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// Postable returns a as Alertmanager's v2 API takes it: labels alertname,
// tenant_id, module_name, server_id and severity; annotations summary,
// version, trace_id and, when known, last_heartbeat_at. A mass heartbeat
// loss has labels alertname, tenant_id and severity, and annotations
// summary, unhealthy and live. A skill outage has labels alertname,
// tenant_id, skill and severity, and the annotation summary.
func (a *Alertmanager) Postable(al Alert) PostableAlert {
	if sk := al.Skill; sk != nil {
		p := PostableAlert{
			Labels: map[string]string{
				"alertname": AlertNameSkill, "tenant_id": al.TenantID.String(), "skill": sk.Skill, "severity": Severity,
			},
			Annotations: map[string]string{"summary": summary(al)},
			StartsAt:    al.StartsAt.UTC(),
			EndsAt:      al.EndsAt.UTC(),
		}
		if a.GeneratorURL != "" {
			p.GeneratorURL = strings.TrimRight(a.GeneratorURL, "/") + "/v1/mcp/skills?name=" + url.QueryEscape(sk.Skill)
		}
		return p
	}
	if l := al.MassLoss; l != nil {
		return PostableAlert{
			Labels: map[string]string{"alertname": AlertNameMassLoss, "tenant_id": l.TenantID.String(), "severity": Severity},
			Annotations: map[string]string{
				"summary": fmt.Sprintf("%d of %d live MCP servers of tenant %s went unhealthy in one sweep",
					l.Unhealthy, l.Live, l.TenantID),
				"unhealthy": strconv.Itoa(l.Unhealthy),
				"live":      strconv.FormatInt(l.Live, 10),
			},
			StartsAt: al.StartsAt.UTC(),
			EndsAt:   al.EndsAt.UTC(),
		}
	}
	p := PostableAlert{
		Labels: map[string]string{
			"alertname":   AlertName,
			"tenant_id":   al.TenantID.String(),
			"module_name": al.ModuleName,
			"server_id":   al.ServerID.String(),
			"severity":    Severity,
		},
		Annotations: map[string]string{
			"summary":  summary(al),
			"version":  al.Version,
			"trace_id": al.TraceID,
		},
		StartsAt: al.StartsAt.UTC(),
		EndsAt:   al.EndsAt.UTC(),
	}
	if !al.LastHeartbeatAt.IsZero() {
		p.Annotations["last_heartbeat_at"] = al.LastHeartbeatAt.UTC().Format(time.RFC3339Nano)
	}
	if a.GeneratorURL != "" {
		p.GeneratorURL = strings.TrimRight(a.GeneratorURL, "/") + "/v1/mcp/servers/" + al.ServerID.String()
	}
	return p
}

// Send posts every alert in one request; Alertmanager takes all or, when it
// refuses some, still keeps the valid ones.
func (a *Alertmanager) Send(ctx context.Context, alerts []Alert) (int, error) {
	if len(alerts) == 0 {
		return 0, nil
	}
	body := make([]PostableAlert, len(alerts))
	for i, al := range alerts {
		body[i] = a.Postable(al)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return 0, &DeliveryError{Alerts: len(alerts), Err: fmt.Errorf("encode: %w", err)}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.endpoint, bytes.NewReader(b))
	if err != nil {
		return 0, &DeliveryError{Alerts: len(alerts), Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent())
	if err := do(a.client, req, len(alerts)); err != nil {
		return 0, err
	}
	return len(alerts), nil
}
