package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// maxBody bounds one export request's body.
const maxBody = 64 << 20

// Span is one received span, its ids in lowercase hex.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          string // "server", "client", "internal", ...
	// Service is the service.name of the span's resource.
	Service string
	// Attrs are the span's attributes, each value as text (a list's
	// values joined by commas).
	Attrs map[string]string
	// Events are the names of the span's events.
	Events     []string
	Start, End time.Time
	// Error is true when the span's status is an error.
	Error bool
}

// Receiver is an OTLP/HTTP trace receiver on a loopback port.
type Receiver struct {
	srv *httptest.Server
	// KeepSpans false makes the receiver only count spans (the benchmark).
	keep bool

	mu       sync.Mutex
	spans    []Span
	count    int
	requests int
}

// NewReceiver starts a receiver; keep false only counts the spans. Close
// stops it.
func NewReceiver(keep bool) *Receiver {
	r := &Receiver{keep: keep}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	return r
}

// URL is the receiver's base URL: the value of OTEL_EXPORTER_OTLP_ENDPOINT
// (the exporter adds /v1/traces).
func (r *Receiver) URL() string { return r.srv.URL }

// Close stops the receiver.
func (r *Receiver) Close() { r.srv.Close() }

// Requests is how many export requests arrived.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Count is how many spans arrived.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// Spans returns a copy of the spans kept, in arrival order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "not an OTLP trace export", http.StatusNotFound)
		return
	}
	var body io.Reader = http.MaxBytesReader(w, req.Body, maxBody)
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer gz.Close()
		body = gz
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var spans []Span
	n := 0
	for _, rs := range msg.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			n += len(ss.GetSpans())
			if !r.keep {
				continue
			}
			for _, s := range ss.GetSpans() {
				spans = append(spans, decode(s, service))
			}
		}
	}
	r.mu.Lock()
	r.requests++
	r.count += n
	r.spans = append(r.spans, spans...)
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func decode(s *tracepb.Span, service string) Span {
	sp := Span{
		TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
		ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Service: service,
		Kind:  strings.ToLower(strings.TrimPrefix(s.GetKind().String(), "SPAN_KIND_")),
		Attrs: attrs(s.GetAttributes()),
		Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
		Error: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
	}
	for _, ev := range s.GetEvents() {
		sp.Events = append(sp.Events, ev.GetName())
	}
	return sp
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		out[kv.GetKey()] = text(kv.GetValue())
	}
	return out
}

func text(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, text(e))
		}
		return strings.Join(parts, ",")
	default:
		return ""
	}
}

// Tree renders the spans of one trace as an indented tree, children under
// their parent in start order, each line the span's name, kind and the
// attributes named in show. A span whose parent was not received (the
// caller's, in another process) is a root.
func Tree(spans []Span, traceID string, show ...string) string {
	var in []Span
	ids := map[string]bool{}
	for _, s := range spans {
		if s.TraceID == traceID {
			in = append(in, s)
			ids[s.SpanID] = true
		}
	}
	slices.SortStableFunc(in, func(a, b Span) int { return a.Start.Compare(b.Start) })
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		for _, s := range in {
			p := s.ParentSpanID
			if !ids[p] {
				p = ""
			}
			if p != parent {
				continue
			}
			fmt.Fprintf(&b, "%s%s [%s]", strings.Repeat("  ", depth), s.Name, s.Kind)
			for _, k := range show {
				if v, ok := s.Attrs[k]; ok {
					fmt.Fprintf(&b, " %s=%s", k, v)
				}
			}
			for _, e := range s.Events {
				fmt.Fprintf(&b, " event=%q", e)
			}
			b.WriteString("\n")
			walk(s.SpanID, depth+1)
		}
	}
	walk("", 0)
	return b.String()
}
