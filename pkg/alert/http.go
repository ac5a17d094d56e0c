package alert

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/cyberos/mcpd/pkg/auth"
	"github.com/cyberos/mcpd/pkg/version"
)

// Timeouts of NewHTTPClient.
const (
	// RequestTimeout bounds one request, from dial to the end of the body.
	RequestTimeout = 10 * time.Second
	dialTimeout    = 5 * time.Second
)

// maxErrorBody bounds what is read of a refusal to quote it.
const maxErrorBody = 512

// NewHTTPClient returns the client destinations use by default: every
// request bounded by RequestTimeout, connections kept alive, proxies from
// the environment.
func NewHTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   dialTimeout,
		ResponseHeaderTimeout: RequestTimeout,
		ExpectContinueTimeout: time.Second,
		MaxIdleConns:          16,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   RequestTimeout,
		// A redirect would re-send a signed body elsewhere: refuse it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// NewDestinations returns one Alertmanager destination per URL and, when
// webhookURL is set, a webhook signed with the secret in webhookSecretFile
// (if set; trailing line endings trimmed). A nil client is NewHTTPClient().
func NewDestinations(alertmanagerURLs []string, webhookURL, webhookSecretFile string, client *http.Client) ([]Destination, error) {
	if client == nil {
		client = NewHTTPClient()
	}
	var out []Destination
	seen := make(map[string]bool)
	add := func(d Destination) error {
		if seen[d.Name()] {
			return fmt.Errorf("destination %s given twice", d.Name())
		}
		seen[d.Name()] = true
		out = append(out, d)
		return nil
	}
	for _, u := range alertmanagerURLs {
		am, err := NewAlertmanager(u, client)
		if err != nil {
			return nil, err
		}
		if err := add(am); err != nil {
			return nil, err
		}
	}
	if webhookSecretFile != "" && webhookURL == "" {
		return nil, errors.New("webhook secret file without a webhook url")
	}
	if webhookURL != "" {
		var secret []byte
		if webhookSecretFile != "" {
			var err error
			if secret, err = auth.ReadSecretFile(webhookSecretFile); err != nil {
				return nil, fmt.Errorf("webhook: %w", err)
			}
		}
		w, err := NewWebhook(webhookURL, secret, client)
		if err != nil {
			return nil, err
		}
		if err := add(w); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// destinationLabel checks that raw is an http(s) URL with a host and returns
// it without its password, query and fragment, trailing slashes trimmed:
// the part of a destination's name that is safe in metrics and logs.
func destinationLabel(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%q is not a URL", raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q: want an http or https URL", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%q: no host", raw)
	}
	clean := url.URL{Scheme: u.Scheme, Host: u.Host, Path: strings.TrimRight(u.Path, "/")}
	if u.User != nil {
		clean.User = url.User(u.User.Username())
	}
	return clean.String(), nil
}

func userAgent() string { return "mcpd/" + version.Version }

// do sends req, with the traceparent of its context's span if any, and
// turns anything but a 2xx into a *DeliveryError.
func do(client *http.Client, req *http.Request, alerts int) error {
	propagation.TraceContext{}.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	resp, err := client.Do(req)
	if err != nil {
		return &DeliveryError{Alerts: alerts, Err: err}
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // let the connection be reused
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	msg := strings.TrimSpace(string(snippet))
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &DeliveryError{Status: resp.StatusCode, Alerts: alerts, Err: errors.New(msg)}
}
