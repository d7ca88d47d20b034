package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// otlpReceiver is an OTLP/HTTP traces endpoint that keeps the spans it receives.
type otlpReceiver struct {
	mu      sync.Mutex
	spans   map[string]map[string]string // span name -> attributes (string values)
	service string
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var msg coltracepb.ExportTraceServiceRequest
	if err != nil || req.URL.Path != "/v1/traces" || proto.Unmarshal(body, &msg) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range msg.ResourceSpans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				r.service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				attrs := map[string]string{}
				for _, a := range s.Attributes {
					attrs[a.Key] = a.GetValue().GetStringValue()
				}
				r.spans[s.Name] = attrs
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(nil)
}

// outboxkit relay exports a producer span per published event over OTLP/HTTP when the standard
// OTEL_EXPORTER_OTLP_ENDPOINT is set, with messaging.system set to the broker, and the service
// name from OTEL_SERVICE_NAME; spans still buffered are flushed when it stops.
func TestRelayExportsSpansToOTLP(t *testing.T) {
	t.Parallel()
	recv := &otlpReceiver{spans: map[string]map[string]string{}}
	srv := httptest.NewServer(recv)
	defer srv.Close()

	db := testsupport.OpenPostgres(t)
	table := testsupport.UniqueName("cli_otlp")
	topic := testsupport.UniqueName("cli.otlp")
	dropTables(t, db, table)
	brokers := testsupport.KafkaBrokers(t)
	testsupport.CreateKafkaTopic(t, brokers, topic)
	kafkaPart := "broker: kafka\nkafka:\n  brokers: [" + strings.Join(brokers, ", ") + "]\n"
	dir := writeConfig(t, pgConfig(testsupport.PostgresDSN(t), table, kafkaPart))
	p := startRelayWithEnv(t, dir, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + srv.URL, "OTEL_SERVICE_NAME=obk-otlp-test"}, "--migrate")
	p.waitLog(t, "tracing: OTLP/HTTP exporter from the OTEL_EXPORTER_OTLP_* variables")
	p.waitLog(t, "forwarder started")
	ids := writeEvents(t, db, table, topic, 3)
	consume(t, brokers, topic, ids)
	if code := p.stop(t); code != 0 {
		t.Fatalf("relay exited with %d after SIGTERM; its log:\n%s", code, p.log())
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	var found map[string]string
	for name, attrs := range recv.spans {
		if strings.Contains(name, topic) {
			found = attrs
		}
	}
	if found == nil {
		t.Fatalf("no span for topic %s among %d received: %v", topic, len(recv.spans), recv.spans)
	}
	if found["messaging.system"] != "kafka" {
		t.Errorf("span attributes %v: messaging.system is not kafka", found)
	}
	if recv.service != "obk-otlp-test" {
		t.Errorf("service.name %q, want OTEL_SERVICE_NAME's obk-otlp-test", recv.service)
	}
}
