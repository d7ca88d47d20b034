package brokerconfig_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// A schema registry that goes down while events wait is an outage, not the events' fault: with
// MaxAttempts 1 (so that one counted attempt would dead-letter an event), the relay keeps the
// events pending with no attempt counted and no dead letter, says it stalls
// (outboxkit_forwarder_publish_stalled 1) and counts them in outboxkit_forwarder_unavailable_total,
// and delivers them by itself, framed, once the registry is back.
//
// The registry is a real Apicurio of its own (scripts/services.sh start-schema-registry on
// another port and state directory), so that stopping it leaves the shared test registry, which
// other tests use, alone. The relay reaches it through a gate (a TCP forwarder): its storage is
// in memory, so a restarted registry has forgotten the schema, and the gate stays shut until
// the schema is registered again, as a registry with persistent storage would come back (a
// registry that answers without the subject is not an outage: its 404 counts attempts).
func TestRegistryOutageSpendsNoAttempts(t *testing.T) {
	reg := newOwnRegistry(t)
	brokers := testsupport.KafkaBrokers(t)
	db := testsupport.OpenPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	topic, dlq := testsupport.UniqueName("schema_outage"), testsupport.UniqueName("schema_outage_dlq")
	testsupport.CreateKafkaTopic(t, brokers, topic)
	testsupport.CreateKafkaTopic(t, brokers, dlq)
	reg.start(ctx)
	const avroSchema = `{"type":"record","name":"E","fields":[{"name":"n","type":"long"}]}`
	reg.register(ctx, schema.Subject(topic), avroSchema)

	gate := newGate(t, reg.port)
	cfg, err := brokerconfig.Parse([]byte(fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%s]\nschema_registry:\n  url: %s\n  latest_ttl: 50ms\n",
		strings.Join(brokers, ", "), gate.url)), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := brokerconfig.Build(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	table := newSchemaOutbox(ctx, t, db)
	metrics := prometheus.NewRegistry()
	stopRelay := runRelay(ctx, t, forwarder.Config{
		DB: db, Dialect: outbox.Postgres, Table: table.Table().Events(), Publisher: b.Publisher(), DeadLetterTopic: dlq,
		MaxAttempts: 1, PublishStallAfter: 500 * time.Millisecond, Metrics: metrics,
		MaxPollInterval: 200 * time.Millisecond, InitialInterval: 50 * time.Millisecond, MaxInterval: time.Second,
	})
	defer stopRelay()

	writeCounted(ctx, t, db, table, topic, 0, 1)
	consumeN(ctx, t, brokers, topic, 1) // the registry up: the first event goes through

	reg.stop(ctx)
	const waiting = 6
	writeCounted(ctx, t, db, table, topic, 1, waiting)
	for {
		if dead := countRows(ctx, t, db, "SELECT COUNT(*) FROM "+table.Table().Events()+" WHERE status = 2"); dead > 0 {
			t.Fatalf("%d events dead-lettered while the registry was down: an outage spent their one attempt", dead)
		}
		if gauge(t, metrics, "outboxkit_forwarder_publish_stalled") == 1 &&
			gauge(t, metrics, "outboxkit_forwarder_unavailable_total") >= waiting {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the relay did not report the outage: publish_stalled %v, unavailable_total %v",
				gauge(t, metrics, "outboxkit_forwarder_publish_stalled"), gauge(t, metrics, "outboxkit_forwarder_unavailable_total"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := countRows(ctx, t, db, "SELECT COUNT(*) FROM "+table.Table().Events()+" WHERE status = 0 AND attempts = 0"); n != waiting {
		t.Fatalf("%d events pending with no attempt counted during the outage, want %d", n, waiting)
	}

	gate.shut()
	reg.start(ctx) // in-memory storage: the restarted registry has forgotten the schema
	id := reg.register(ctx, schema.Subject(topic), avroSchema)
	gate.open()
	got := consumeN(ctx, t, brokers, topic, 1+waiting)
	var header sr.ConfluentHeader
	for _, r := range got[1:] {
		if sid, _, err := header.DecodeID(r.Value); err != nil || sid != id {
			t.Errorf("record %s: % x is not framed with schema id %d (%v)", r.Key, r.Value, id, err)
		}
	}
	for countRows(ctx, t, db, "SELECT COUNT(*) FROM "+table.Table().Events()) > 0 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond) // the acknowledgement follows the broker's
	}
	if n := countRows(ctx, t, db, "SELECT COUNT(*) FROM "+table.Table().Events()); n != 0 {
		t.Fatalf("%d rows left in the outbox after the registry came back (dead or pending)", n)
	}
	for gauge(t, metrics, "outboxkit_forwarder_publish_stalled") != 0 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	if v := gauge(t, metrics, "outboxkit_forwarder_publish_stalled"); v != 0 {
		t.Fatalf("publish_stalled %v after the events were delivered, want 0", v)
	}
}

// ownRegistry is an Apicurio Registry of the test's own, started and stopped through
// scripts/services.sh with its own port and state directory; its build is the shared one (a
// link to it), so starting it takes seconds, not a Maven build.
type ownRegistry struct {
	t      *testing.T
	script string
	env    []string
	url    string
	port   int
	client *sr.Client
}

func newOwnRegistry(t *testing.T) *ownRegistry {
	t.Helper()
	testsupport.SchemaRegistryURL(t) // the shared registry runs: its build exists
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "services.sh"))
	if err != nil {
		t.Fatal(err)
	}
	shared := os.Getenv("SERVICES_STATE_DIR")
	if shared == "" {
		shared = "/var/tmp/outboxkit-services"
	}
	state := t.TempDir()
	if err := os.MkdirAll(filepath.Join(state, "apicurio"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(shared, "apicurio", "build"), filepath.Join(state, "apicurio", "build")); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	r := &ownRegistry{t: t, script: script, port: port, url: fmt.Sprintf("http://127.0.0.1:%d/apis/ccompat/v7", port),
		env: append(os.Environ(), "SERVICES_STATE_DIR="+state, "SERVICES_LOG_DIR="+filepath.Join(state, "logs"),
			"APICURIO_PORT="+strconv.Itoa(port))}
	if r.client, err = sr.NewClient(sr.URLs(r.url)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.stop(context.Background()) })
	return r
}

func (r *ownRegistry) run(ctx context.Context, sub string) {
	r.t.Helper()
	cmd := exec.CommandContext(ctx, "bash", r.script, sub)
	cmd.Env = r.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		r.t.Fatalf("scripts/services.sh %s (own registry at %s): %v: %s", sub, r.url, err, out.String())
	}
}

func (r *ownRegistry) start(ctx context.Context) { r.t.Helper(); r.run(ctx, "start-schema-registry") }
func (r *ownRegistry) stop(ctx context.Context)  { r.t.Helper(); r.run(ctx, "stop-schema-registry") }

// register registers an Avro schema under subject and returns its id.
func (r *ownRegistry) register(ctx context.Context, subject, avro string) int {
	r.t.Helper()
	ss, err := r.client.CreateSchema(ctx, subject, sr.Schema{Type: sr.TypeAvro, Schema: avro})
	if err != nil {
		r.t.Fatalf("register %s on %s: %v", subject, r.url, err)
	}
	return ss.ID
}

// gate forwards TCP connections to a port on 127.0.0.1 while open; while shut it closes them
// at once. Its url is the registry's API through it.
type gate struct {
	url    string
	closed atomic.Bool
}

func newGate(t *testing.T, port int) *gate {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{url: fmt.Sprintf("http://%s/apis/ccompat/v7", l.Addr())}
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { g.forward(c, target) })
		}
	})
	return g
}

func (g *gate) forward(c net.Conn, target string) {
	defer c.Close()
	if g.closed.Load() {
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		return // the registry is down: the client sees its connection closed
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

func (g *gate) shut() { g.closed.Store(true) }
func (g *gate) open() { g.closed.Store(false) }

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// newSchemaOutbox migrates an outbox table of the test's own, dropped with the test.
func newSchemaOutbox(ctx context.Context, t *testing.T, db *sql.DB) *outbox.Writer {
	t.Helper()
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: testsupport.UniqueName("schema_outbox")})
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, db, w.Table()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range w.Table().Tables() {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + n)
		}
	})
	return w
}

// writeCounted commits n events {"n": from..from+n-1} to topic, on two keys.
func writeCounted(ctx context.Context, t *testing.T, db *sql.DB, w *outbox.Writer, topic string, from, n int) {
	t.Helper()
	var events []outbox.Event
	for i := from; i < from+n; i++ {
		e, err := outbox.NewJSONEvent(topic, "counter", fmt.Sprintf("k-%d", i%2), "Counted", map[string]any{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		e.ID = uuid.Must(uuid.NewV7())
		events = append(events, e)
	}
	writeEvents(ctx, t, db, w, events...)
}

func writeEvents(ctx context.Context, t *testing.T, db *sql.DB, w *outbox.Writer, events ...outbox.Event) {
	t.Helper()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTx(ctx, tx, events...); err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// runRelay runs a forwarder with cfg (a warn-level log on stderr unless cfg has one) until the
// returned function is called.
func runRelay(ctx context.Context, t *testing.T, cfg forwarder.Config) func() {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	fwd, err := forwarder.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- fwd.Run(runCtx) }()
	return func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("forwarder.Run: %v", err)
		}
	}
}

func countRows(ctx context.Context, t *testing.T, db *sql.DB, query string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(ctx, query).Scan(&n); err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	return n
}

// gauge is the sum of the series of the metric name (a gauge or a counter) in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}
