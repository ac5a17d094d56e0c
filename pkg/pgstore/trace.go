package pgstore

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the tracer of the store's spans.
const tracerName = "github.com/cyberos/mcpd/pkg/pgstore"

// dbSystem is the db.system.name of every span of the store.
var dbSystem = attribute.String("db.system.name", "postgresql")

// queryTracer gives each statement a client span, the child of the span of
// the call that runs it: its text as sent, with placeholders and never a
// parameter's value. Statements run outside a recorded span (the
// heartbeat batches, the feed's polls) get none.
type queryTracer struct {
	tracer trace.Tracer
}

// spanKey keeps the span a statement started, for its end.
type spanKey struct{}

func (t queryTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	op, target := querySummary(data.SQL)
	name := op
	if target != "" {
		name += " " + target
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		dbSystem,
		attribute.String("db.operation.name", op),
		attribute.String("db.query.text", strings.TrimSpace(data.SQL)),
	))
	return context.WithValue(ctx, spanKey{}, span)
}

func (t queryTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	span, ok := ctx.Value(spanKey{}).(trace.Span)
	if !ok {
		return
	}
	if data.Err != nil {
		span.RecordError(data.Err)
		span.SetStatus(codes.Error, "statement failed")
	} else {
		span.SetAttributes(attribute.Int64("db.response.returned_rows", data.CommandTag.RowsAffected()))
	}
	span.End()
}

// querySummary returns a statement's first keyword (SELECT, UPDATE, BEGIN,
// ...) and the first of mcpd's functions or tables it names (mcp_…).
func querySummary(sql string) (op, target string) {
	fields := strings.Fields(sql)
	if len(fields) == 0 {
		return "SQL", ""
	}
	op = strings.ToUpper(fields[0])
	if op == "WITH" {
		for _, f := range fields {
			switch u := strings.ToUpper(f); u {
			case "SELECT", "UPDATE", "INSERT", "DELETE":
				op = u
			}
		}
	}
	if i := strings.Index(sql, "mcp_"); i >= 0 {
		j := i
		for j < len(sql) && (sql[j] == '_' || sql[j] >= 'a' && sql[j] <= 'z' || sql[j] >= '0' && sql[j] <= '9') {
			j++
		}
		target = sql[i:j]
	}
	return op, target
}
