package brokerconfig_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/brokers/schema"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// faultProxy is an HTTP proxy in front of the real registry that answers 500 or status (as a registry's
// own failure, in the Confluent error form) for the requests its mode selects.
type faultProxy struct {
	url      string       // the registry's API through the proxy
	mode     atomic.Int32 // proxyPass, proxySubject or proxyAll
	subject  string       // the subject proxySubject fails
	status   int          // the status answered (set before use); 0: 500
	injected atomic.Int64 // 500s answered
}

const (
	proxyPass = iota
	proxySubject
	proxyAll
)

func newFaultProxy(t *testing.T, registryURL, subject string) *faultProxy {
	t.Helper()
	u, err := url.Parse(registryURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{subject: subject}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mode := p.mode.Load()
		if mode == proxyAll || mode == proxySubject && strings.Contains(r.URL.Path, "/subjects/"+p.subject+"/") {
			p.injected.Add(1)
			w.Header().Set("Content-Type", "application/json")
			status := p.status
			if status == 0 {
				status = http.StatusInternalServerError
			}
			w.WriteHeader(status)
			_, _ = fmt.Fprint(w, `{"error_code":50001,"message":"injected server error"}`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL + u.Path
	return p
}

// A registry that keeps answering 500 for one subject while it answers its health check is
// bounded: once the errors have lasted server_error_bound they are that subject's failure, and
// its events spend attempts (with max_attempts 1, dead-lettered at once) while another subject's
// events flow. A registry that answers 500 to everything, its health check included, is an
// outage: no attempt is spent and the events arrive once it answers again.
func TestRegistryServerErrorForOneSubjectIsBounded(t *testing.T) {
	registryURL := testsupport.SchemaRegistryURL(t)
	brokers := testsupport.KafkaBrokers(t)
	db := testsupport.OpenPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	failing, healthy := testsupport.UniqueName("schema_500"), testsupport.UniqueName("schema_ok")
	dlq := testsupport.UniqueName("schema_500_dlq")
	for _, topic := range []string{failing, healthy, dlq} {
		testsupport.CreateKafkaTopic(t, brokers, topic)
	}
	client, err := sr.NewClient(sr.URLs(registryURL))
	if err != nil {
		t.Fatal(err)
	}
	const avroSchema = `{"type":"record","name":"E","fields":[{"name":"n","type":"long"}]}`
	for _, topic := range []string{failing, healthy} {
		if _, err := client.CreateSchema(ctx, schema.Subject(topic), sr.Schema{Type: sr.TypeAvro, Schema: avroSchema}); err != nil {
			t.Fatal(err)
		}
	}
	proxy := newFaultProxy(t, registryURL, schema.Subject(failing))
	proxy.mode.Store(proxySubject)

	cfg, err := brokerconfig.Parse([]byte(fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%s]\nschema_registry:\n  url: %s\n  latest_ttl: 50ms\n  server_error_bound: 1ms\n",
		strings.Join(brokers, ", "), proxy.url)), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := brokerconfig.Build(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	table := newSchemaOutbox(ctx, t, db)
	events := table.Table().Events()
	metrics := prometheus.NewRegistry()
	stopRelay := runRelay(ctx, t, forwarder.Config{
		DB: db, Dialect: outbox.Postgres, Table: events, Publisher: b.Publisher(), DeadLetterTopic: dlq,
		MaxAttempts: 1, PublishStallAfter: 500 * time.Millisecond, Metrics: metrics,
		MaxPollInterval: 200 * time.Millisecond, InitialInterval: 50 * time.Millisecond, MaxInterval: time.Second,
	})
	defer stopRelay()

	// One subject fails while the registry is healthy: its events are dead-lettered, the other
	// subject's arrive.
	writeKeyed(ctx, t, db, table, failing, "f", 0, 2)
	writeKeyed(ctx, t, db, table, healthy, "h", 0, 2)
	consumeN(ctx, t, brokers, healthy, 2)
	phase, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	for countRows(ctx, t, db, "SELECT COUNT(*) FROM "+events+" WHERE status = 2 AND attempts = 1 AND topic = '"+failing+"'") < 2 {
		if phase.Err() != nil {
			t.Fatalf("the events of a subject the registry answers 500 for (%d times) are not dead-lettered after server_error_bound: dead %d, pending %d, unavailable_total %v",
				proxy.injected.Load(), countRows(ctx, t, db, "SELECT COUNT(*) FROM "+events+" WHERE status = 2"),
				countRows(ctx, t, db, "SELECT COUNT(*) FROM "+events+" WHERE status = 0"), gauge(t, metrics, "outboxkit_forwarder_unavailable_total"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	var lastError string
	if err := db.QueryRowContext(ctx, "SELECT last_error FROM "+events+" WHERE status = 2 LIMIT 1").Scan(&lastError); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lastError, "injected server error") || !strings.Contains(lastError, "server_error_bound") {
		t.Errorf("dead letter's last_error %q does not name the registry's error and the bound", lastError)
	}
	consumeN(ctx, t, brokers, dlq, 2)

	// The whole registry answers 500, its health check too: an outage, no attempt spent.
	proxy.mode.Store(proxyAll)
	before := gauge(t, metrics, "outboxkit_forwarder_unavailable_total")
	const waiting = 3
	writeKeyed(ctx, t, db, table, healthy, "h", 2, waiting)
	for gauge(t, metrics, "outboxkit_forwarder_unavailable_total") < before+waiting {
		if ctx.Err() != nil {
			t.Fatalf("the relay did not count the outage: unavailable_total %v, was %v", gauge(t, metrics, "outboxkit_forwarder_unavailable_total"), before)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := countRows(ctx, t, db, "SELECT COUNT(*) FROM "+events+" WHERE status = 0 AND attempts = 0 AND topic = '"+healthy+"'"); n != waiting {
		t.Fatalf("%d events pending with no attempt while the whole registry answered 500, want %d", n, waiting)
	}
	proxy.mode.Store(proxyPass)
	consumeN(ctx, t, brokers, healthy, 2+waiting)
	for countRows(ctx, t, db, "SELECT COUNT(*) FROM "+events+" WHERE status <> 2") > 0 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	if n := countRows(ctx, t, db, "SELECT COUNT(*) FROM "+events+" WHERE status = 2"); n != 2 {
		t.Fatalf("%d dead letters, want the 2 of the failing subject", n)
	}
}

// writeKeyed commits n events {"n": from..from+n-1} to topic, on the two keys <prefix>-0 and
// <prefix>-1 (keys of their own: a key's order spans topics, so events of another topic on the
// same keys would wait behind these).
func writeKeyed(ctx context.Context, t *testing.T, db *sql.DB, w *outbox.Writer, topic, prefix string, from, n int) {
	t.Helper()
	var events []outbox.Event
	for i := from; i < from+n; i++ {
		e, err := outbox.NewJSONEvent(topic, "counter", fmt.Sprintf("%s-%d", prefix, i%2), "Counted", map[string]any{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		e.ID = uuid.Must(uuid.NewV7())
		events = append(events, e)
	}
	writeEvents(ctx, t, db, w, events...)
}

// On polling, an outage that holds one subject's events does not slow the worker's other keys:
// with one worker, batches of 10 and a max_poll_interval of a minute, the registry answers 503
// (an outage, no attempts) for one subject whose event is the oldest in every claim, and the
// worker still relays 200 events of another subject one full batch after another instead of
// backing off towards the minute; the held event stays pending with no attempt counted.
func TestRegistryOutageOfOneSubjectKeepsTheWorkerFlowing(t *testing.T) {
	registryURL := testsupport.SchemaRegistryURL(t)
	brokers := testsupport.KafkaBrokers(t)
	db := testsupport.OpenPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	held, flowing := testsupport.UniqueName("schema_503"), testsupport.UniqueName("schema_flow")
	for _, topic := range []string{held, flowing} {
		testsupport.CreateKafkaTopic(t, brokers, topic)
	}
	client, err := sr.NewClient(sr.URLs(registryURL))
	if err != nil {
		t.Fatal(err)
	}
	const avroSchema = `{"type":"record","name":"E","fields":[{"name":"n","type":"long"}]}`
	for _, topic := range []string{held, flowing} {
		if _, err := client.CreateSchema(ctx, schema.Subject(topic), sr.Schema{Type: sr.TypeAvro, Schema: avroSchema}); err != nil {
			t.Fatal(err)
		}
	}
	proxy := newFaultProxy(t, registryURL, schema.Subject(held))
	proxy.status = http.StatusServiceUnavailable
	proxy.mode.Store(proxySubject)
	cfg, err := brokerconfig.Parse([]byte(fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%s]\nschema_registry:\n  url: %s\n",
		strings.Join(brokers, ", "), proxy.url)), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := brokerconfig.Build(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	table := newSchemaOutbox(ctx, t, db)
	events := table.Table().Events()
	writeKeyed(ctx, t, db, table, held, "held", 0, 1)
	const n = 200
	writeKeyed(ctx, t, db, table, flowing, "flow", 0, n)
	metrics := prometheus.NewRegistry()
	stopRelay := runRelay(ctx, t, forwarder.Config{
		DB: db, Dialect: outbox.Postgres, Table: events, Publisher: b.Publisher(), DeadLetterTopic: held + "_dlq",
		MaxAttempts: 1, Metrics: metrics, Workers: 1, BatchSize: 10,
		MinPollInterval: 10 * time.Millisecond, MaxPollInterval: time.Minute, InitialInterval: 50 * time.Millisecond, MaxInterval: time.Second,
	})
	defer stopRelay()

	flow, stop := context.WithTimeout(ctx, 45*time.Second)
	defer stop()
	consumeN(flow, t, brokers, flowing, n)
	if got := countRows(ctx, t, db, "SELECT COUNT(*) FROM "+events+" WHERE topic = '"+held+"' AND status = 0 AND attempts = 0"); got != 1 {
		t.Fatalf("the held event: %d pending with no attempt, want 1", got)
	}
	if v := gauge(t, metrics, "outboxkit_forwarder_unavailable_total"); v < 2 {
		t.Fatalf("unavailable_total %v: the held event was not tried again with the batches", v)
	}
}
