package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"gopkg.in/yaml.v3"

	"github.com/cyberos/mcpd/pkg/api"
	"github.com/cyberos/mcpd/pkg/client"
	"github.com/cyberos/mcpd/pkg/daemon"
	"github.com/cyberos/mcpd/pkg/registry"
	"github.com/cyberos/mcpd/pkg/testing/pgtest"
	"github.com/cyberos/mcpd/pkg/testing/testlog"
	"github.com/cyberos/mcpd/pkg/testing/tlstest"
)

// The Prometheus rules and the Grafana dashboard shipped under docs/ are
// checked here: promtool parses and unit-tests the rules, parses every
// query of the dashboard, and every metric either names is one that a
// running mcpd serves on /metrics.

var (
	rulesFile     = filepath.Join("..", "..", "docs", "prometheus", "mcpd-rules.yml")
	rulesTestFile = filepath.Join("..", "..", "docs", "prometheus", "mcpd-rules_test.yml")
	dashboardFile = filepath.Join("..", "..", "docs", "grafana", "mcpd.json")
	runbooksFile  = filepath.Join("..", "..", "docs", "prometheus", "runbooks.md")
)

// runbookBase is where the rules' runbook_url annotations point: the
// sections of docs/prometheus/runbooks.md, by the alert's lower-cased name.
const runbookBase = "https://github.com/cyberos/mcpd/blob/main/docs/prometheus/runbooks.md#"

// installPromtool is how to install promtool.
const installPromtool = "promtool not found: apt-get install prometheus"

// promtool returns the path of promtool, or skips (fails under CI=true).
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		pgtest.Missing(t, installPromtool)
	}
	return path
}

// runPromtool runs promtool in dir and fails with its output, and with
// what the caller adds, unless it says SUCCESS.
func runPromtool(t *testing.T, dir, explain string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s%s", strings.Join(args, " "), err, out, explain)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool %s did not say SUCCESS:\n%s%s", strings.Join(args, " "), out, explain)
	}
}

// The metrics mcpd serves with everything that has metrics switched on
// (TLS, an alert destination) and after a registration and a request,
// scraped once per test binary.
var (
	servedOnce  sync.Once
	servedNames map[string]bool
	servedErr   error
)

// servedMetrics returns the names of every sample on a running mcpd's
// /metrics (histograms as their _bucket, _sum and _count series).
func servedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	servedOnce.Do(func() { servedNames, servedErr = scrapeFullDaemon(t) })
	if servedErr != nil {
		t.Fatal(servedErr)
	}
	return servedNames
}

func scrapeFullDaemon(t *testing.T) (map[string]bool, error) {
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	cfg := devConfig()
	cfg.BlindAfter = -1
	cfg.TLSCertFile, cfg.TLSKeyFile = ca.Issue(t, tlstest.Options{CommonName: "mcpd"}).Write(t, dir, "server")
	// Nothing is sent there: no server becomes unhealthy under the fake clock.
	cfg.AlertWebhookURL = "http://127.0.0.1:9/hook"
	var stdout testlog.Buffer
	d, err := daemon.New(cfg, daemon.Options{Clock: clockwork.NewFakeClock(), Stdout: &stdout,
		Logger: slog.New(slog.NewJSONHandler(&testlog.Buffer{}, nil))})
	if err != nil {
		return nil, err
	}
	if err := d.Start(context.Background()); err != nil {
		return nil, err
	}
	defer func() { _ = d.Stop(context.Background()) }()
	m := tokenRE.FindStringSubmatch(stdout.String())
	if m == nil {
		return nil, fmt.Errorf("no token in the banner:\n%s", stdout.String())
	}
	tr, err := client.NewTLSTransport(client.TLSFiles{CAFile: tlstest.WriteFile(t, dir, "ca.pem", ca.PEM)})
	if err != nil {
		return nil, err
	}
	base := "https://" + d.Addr()
	c := client.New(base, m[1], client.WithTransport(tr))
	defer c.CloseIdleConnections()
	if _, _, err := c.Register(context.Background(), api.RegisterRequest{ModuleName: "calendar", Version: "1.3.2",
		SupportedProtocols: []string{"2025-06-18"}, Skills: []registry.SkillInfo{{Name: "search"}}}, ""); err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	_, body := get(t, httpsClient(t, ca, nil), base+"/metrics")
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		names[name] = true
	}
	return names, nil
}

// promqlWords are the identifiers of PromQL that are not metric names.
var promqlWords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
	"group_left", "group_right", "inf", "nan", "Inf", "NaN", "atan2"}

var (
	promqlString   = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlIdent    = regexp.MustCompile(`[a-zA-Z_:][\w:]*`)
)

// metricNames returns the metric names a PromQL expression reads: its
// identifiers that are not inside strings, label matchers, ranges or
// grouping clauses, and that are neither functions nor keywords. promtool
// has parsed the expression before, so that this tokenizer meets valid
// PromQL only.
func metricNames(expr string) []string {
	s := promqlString.ReplaceAllString(expr, `""`)
	s = promqlMatchers.ReplaceAllString(s, " ")
	s = promqlGrouping.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range promqlIdent.FindAllStringIndex(s, -1) {
		word := s[loc[0]:loc[1]]
		if loc[0] > 0 && (s[loc[0]-1] == '.' || s[loc[0]-1] >= '0' && s[loc[0]-1] <= '9') {
			continue // the exponent of a number: 1e3
		}
		if strings.HasPrefix(strings.TrimLeft(s[loc[1]:], " \t\n"), "(") || slices.Contains(promqlWords, word) {
			continue // a function or a keyword
		}
		names = append(names, word)
	}
	sort.Strings(names)
	return slices.Compact(names)
}

func TestMetricNames(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string][]string{
		`up{job="mcpd"} == 0`: {"up"},
		`increase(mcpd_a_total{job="x",q=~"a{b}"}[5m]) > 0 and on(instance) rate(mcpd_b_total[1m]) < 1e3`: {"mcpd_a_total", "mcpd_b_total"},
		`histogram_quantile(0.99, sum by (le, route) (rate(mcpd_c_bucket[5m])))`:                          {"mcpd_c_bucket"},
		`mcpd_d - time() < 14 * 86400`: {"mcpd_d"},
		`max without (status) (mcpd_e) / ignoring(x) group_left(y) mcpd_f offset 5m`: {"mcpd_e", "mcpd_f"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%s) = %v, want %v", expr, got, want)
		}
	}
}

// checkServed fails for every metric of expr that mcpd does not serve;
// up is Prometheus's own.
func checkServed(t *testing.T, where, expr string, served map[string]bool) {
	t.Helper()
	names := metricNames(expr)
	if len(names) == 0 {
		t.Errorf("%s: no metric in %q", where, expr)
	}
	for _, n := range names {
		if n != "up" && !served[n] {
			t.Errorf("%s: %s is not on mcpd's /metrics (%q)", where, n, expr)
		}
	}
}

// perReplicaIdentical are the gauges every replica reports alike (counted
// from the shared database): they are aggregated with max, never sum.
var perReplicaIdentical = []string{"mcpd_servers", "mcpd_alerts_pending", "mcpd_alerts_oldest_undelivered_seconds"}

var sumAggregation = regexp.MustCompile(`\bsum\b`)

func checkAggregation(t *testing.T, where, expr string) {
	t.Helper()
	for _, n := range metricNames(expr) {
		if slices.Contains(perReplicaIdentical, n) && (sumAggregation.MatchString(expr) || !strings.Contains(expr, "max")) {
			t.Errorf("%s: %s is the same on every replica: aggregate it with max, not sum (%q)", where, n, expr)
		}
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func TestPrometheusRules(t *testing.T) {
	t.Parallel()
	runPromtool(t, ".", "", "check", "rules", rulesFile)
	runPromtool(t, filepath.Dir(rulesTestFile), "", "test", "rules", filepath.Base(rulesTestFile))

	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	runbooks, err := os.ReadFile(runbooksFile)
	if err != nil {
		t.Fatal(err)
	}
	served := servedMetrics(t)
	var alerts []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			checkServed(t, r.Alert, r.Expr, served)
			checkAggregation(t, r.Alert, r.Expr)
			if r.Labels["severity"] != "critical" && r.Labels["severity"] != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, r.Labels["severity"])
			}
			for _, k := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[k]) == "" {
					t.Errorf("%s: no %s annotation", r.Alert, k)
				}
			}
			// The runbook is a section of the repository's runbooks page,
			// linked as Prometheus' convention has it, not prose.
			if _, ok := r.Annotations["runbook"]; ok {
				t.Errorf("%s: a prose runbook annotation; give runbook_url", r.Alert)
			}
			if want := runbookBase + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if !regexp.MustCompile(`(?m)^## ` + r.Alert + `\n\n\S`).Match(runbooks) {
				t.Errorf("%s: no section \"## %s\" in %s", r.Alert, r.Alert, runbooksFile)
			}
			// Every alert is unit-tested firing.
			if !regexp.MustCompile(`alertname: ` + r.Alert + `\n\s+exp_alerts:\n\s+- exp_labels`).Match(tests) {
				t.Errorf("%s: no test in %s expects it to fire", r.Alert, rulesTestFile)
			}
		}
	}
	// What the issue asks the rules to cover.
	for _, want := range []string{"MCPDDown", "MCPDSweepsFailing", "MCPDSweepsLate", "MCPDDatabaseUnavailable",
		"MCPDWatchStreamsCut", "MCPDCertificateExpiresSoon", "MCPDRateLimited", "MCPDAlertDeliveryFailing"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s in %s", want, rulesFile)
		}
	}
}

// grafanaPanel is what the test reads of a panel: its queries, and the
// panels of a collapsed row.
type grafanaPanel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaDashboard struct {
	UID        string         `json:"uid"`
	Title      string         `json:"title"`
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// grafanaVars stand for the dashboard's variables when its queries are
// parsed.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
	"${job}", "mcpd", "$job", "mcpd", "${instance}", ".*", "$instance", ".*")

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`)

func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash grafanaDashboard
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Fatalf("dashboard without uid or title")
	}
	type query struct{ where, expr string }
	var queries []query
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for i, tg := range p.Targets {
				queries = append(queries, query{fmt.Sprintf("panel %q, query %d", p.Title, i), grafanaVars.Replace(tg.Expr)})
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(QUERY, LABEL)", v.Name, v.Definition)
			continue
		}
		queries = append(queries, query{"variable " + v.Name, grafanaVars.Replace(m[1])})
	}
	if len(queries) < 20 {
		t.Fatalf("%d queries in the dashboard", len(queries))
	}

	// promtool parses each query as the expression of a recording rule.
	var rules, index strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, q := range queries {
		if strings.Contains(q.expr, "$") {
			t.Errorf("%s: a variable the test does not know: %q", q.where, q.expr)
		}
		expr, err := json.Marshal(q.expr) // a JSON string is a YAML string
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&rules, "      - record: dashboard:query%d\n        expr: %s\n", i, expr)
		fmt.Fprintf(&index, "dashboard:query%d is %s\n", i, q.where)
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, ".", index.String(), "check", "rules", file)

	served := servedMetrics(t)
	covered := map[string]bool{}
	for _, q := range queries {
		checkServed(t, q.where, q.expr, served)
		checkAggregation(t, q.where, q.expr)
		for _, n := range metricNames(q.expr) {
			covered[n] = true
		}
	}
	// What the issue asks the dashboard to show.
	for _, want := range []string{"mcpd_servers", "mcpd_heartbeats_total", "mcpd_http_request_duration_seconds_bucket",
		"mcpd_sweep_duration_seconds_bucket", "mcpd_feed_events_total", "mcpd_watch_streams", "mcpd_limit_refusals_total",
		"mcpd_alerts_pending", "mcpd_store_errors_total"} {
		if !covered[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
}
