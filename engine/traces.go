package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/engine/audit"
)

// TraceFlushTimeout bounds the flush of spans at exit: a dead or slow
// collector may cost bridge exec and serve's drain this much, no more.
const TraceFlushTimeout = 2 * time.Second

// maxTraceValue bounds one value put in a span (MCP_BRIDGE_TRACE_VALUES):
// collectors refuse large spans, and a trace is not the audit trail.
const maxTraceValue = 4 << 10

// traces is the process's span export when env asks for it: the SDK's
// TracerProvider with a batch span processor over the OTLP exporter (HTTP,
// or gRPC with OTEL_EXPORTER_OTLP_PROTOCOL=grpc),
// set as the global provider that actors' spans come from (actors/trace.go).
//
// The call path never waits on the collector: the batch processor queues
// ended spans (2048 by default, OTEL_BSP_*) and drops what does not fit,
// and exports on its own goroutine, which the provider owns and shutdown
// stops.
type traces struct {
	tp     *sdktrace.TracerProvider
	log    zerolog.Logger
	warned atomic.Bool
}

// startTraces sets up the span export of env, or returns nil when traces
// are off. The exporter reads OTEL_EXPORTER_OTLP_* itself (endpoint,
// headers, timeout, compression, certificates), the resource reads
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, and the provider reads
// OTEL_TRACES_SAMPLER; the bridge read the rest (readTraces).
//
// With MCP_BRIDGE_TRACE_VALUES, values go into spans through red, the
// audit trail's rules: secret-looking keys, credentials and serve's tokens
// are redacted.
func startTraces(env Env, version string, red *audit.Redactor, log zerolog.Logger) (*traces, error) {
	if env.TraceValues {
		actors.SetTraceValues(func(s string) string {
			if json.Valid([]byte(s)) {
				s = string(red.JSON([]byte(s)))
			} else {
				s = red.String(s)
			}
			if len(s) > maxTraceValue {
				s = s[:maxTraceValue] + "…"
			}
			// OTLP's protobuf refuses a string that is not UTF-8, and with
			// it the whole batch: the clip may have cut a character, and an
			// error message may carry any bytes.
			return strings.ToValidUTF8(s, "\uFFFD")
		})
	} else {
		actors.SetTraceValues(nil)
	}
	if !env.Traces {
		return nil, nil
	}
	// New makes no connection: a dead collector fails exports later, on
	// the processor's goroutine.
	var exp sdktrace.SpanExporter
	var err error
	if env.TraceProtocol == "grpc" {
		exp, err = otlptracegrpc.New(context.Background())
	} else {
		exp, err = otlptracehttp.New(context.Background())
	}
	if err != nil {
		return nil, fmt.Errorf("traces: %w", err)
	}
	res, err := resource.New(context.Background(),
		resource.WithAttributes(attribute.String("service.name", "bridge"), attribute.String("service.version", version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		log.Warn().Err(err).Msg("traces: resource attributes from OTEL_RESOURCE_ATTRIBUTES ignored")
	}
	t := &traces{log: log.With().Str("actor", "traces").Logger()}
	t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(t.exportFailed))
	otel.SetTracerProvider(t.tp)
	return t, nil
}

// exportFailed logs the SDK's errors (mostly a collector that cannot be
// reached): the first at warn level, the rest at debug, so a dead
// collector costs the log one line.
func (t *traces) exportFailed(err error) {
	if t.warned.CompareAndSwap(false, true) {
		t.log.Warn().Err(err).Msg("traces: export failed; spans are dropped while the collector is unreachable (later failures are logged at debug level)")
		return
	}
	t.log.Debug().Err(err).Msg("traces: export failed")
}

// shutdown flushes the spans still queued, within TraceFlushTimeout, and
// stops the export. Past the bound the rest are dropped.
func (t *traces) shutdown() {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), TraceFlushTimeout)
	defer cancel()
	if err := t.tp.Shutdown(ctx); err != nil {
		t.log.Debug().Err(err).Msg("traces: flush at exit incomplete")
	}
}
