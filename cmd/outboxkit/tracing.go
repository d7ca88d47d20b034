package main

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.27.0"
)

// The standard OpenTelemetry variables the relay looks at itself; the exporter reads the other
// OTEL_EXPORTER_OTLP_* ones (headers, timeout, certificates, compression), the resource
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
const (
	envOTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envOTLPTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envOTLPProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envOTLPTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envTracesExporter     = "OTEL_TRACES_EXPORTER"
	defaultServiceName    = "outboxkit-relay"
)

// relayTracing returns the relay's tracer provider, or nil (no tracing) unless an OTLP endpoint
// variable is set and OTEL_TRACES_EXPORTER is not "none". Spans go over OTLP/HTTP (protobuf);
// another protocol is a configuration error naming its variable.
func relayTracing(ctx context.Context, lookupEnv func(string) (string, bool)) (*sdktrace.TracerProvider, error) {
	if v, _ := lookupEnv(envTracesExporter); strings.TrimSpace(v) == "none" {
		return nil, nil
	}
	endpoint, ok := lookupEnv(envOTLPTracesEndpoint)
	if !ok || endpoint == "" {
		endpoint, ok = lookupEnv(envOTLPEndpoint)
	}
	if !ok || strings.TrimSpace(endpoint) == "" {
		return nil, nil
	}
	if v, _ := lookupEnv(envTracesExporter); v != "" && strings.TrimSpace(v) != "otlp" {
		return nil, usageErr(fmt.Errorf("%s: %q is not supported (allowed: otlp, none)", envTracesExporter, v))
	}
	for _, name := range []string{envOTLPTracesProtocol, envOTLPProtocol} {
		if v, ok := lookupEnv(name); ok && v != "" {
			if v != "http/protobuf" {
				return nil, usageErr(fmt.Errorf("%s: %q is not supported by outboxkit relay (allowed: http/protobuf)", name, v))
			}
			break
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, usageErr(fmt.Errorf("%s %q: %w", envOTLPEndpoint, endpoint, err))
	}
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName(defaultServiceName)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, usageErr(fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME: %w", err))
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
