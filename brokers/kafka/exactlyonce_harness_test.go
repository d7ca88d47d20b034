package kafka

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// The harness of the exactly-once tests: a real PostgreSQL outbox, the real Kafka, relays run
// in this process, each with its own database pool behind a proxy that can pause it (a relay
// whose connections stall, as a SIGSTOPped process's do) and its own Publisher.

var (
	_ forwarder.TransactionalPublisher = (*Publisher)(nil)
	_ admin.CheckpointReader           = (*Publisher)(nil)
)

// sharedCheckpointTopic is the checkpoint topic of every exactly-once test: the units of the
// tests (their prefixes name their own tables) share its partitions, as the units of several
// tables would in production, and the shared broker is spared a 64-partition topic per test.
const sharedCheckpointTopic = "outboxkit-test.checkpoints"

// harnessUnits is the relays' TransactionalUnits: more units than relays, so that the tests
// move units between relays.
const harnessUnits = 8

type eoHarness struct {
	t          testing.TB
	dsn        string
	db         *sql.DB
	writer     *outbox.Writer
	brokers    []string
	topic      string
	checkpoint string
	// maxBytes, when set, is the relays' Kafka MessageMaxBytes.
	maxBytes int
	// source is the relays' source: polling, or cdc (newEOHarnessOn).
	source forwarder.Source
	// prefix, when set, is the relays' TransactionalIDPrefix.
	prefix string
	// tracer, when set, is the relays' TracerProvider.
	tracer trace.TracerProvider
	// publisherClassifies, when set, leaves Config.IsRetriable unset, so that the relays
	// classify errors with their publisher's own Retriable (a decorator's) instead of Retriable.
	publisherClassifies bool
	// decode, when set, turns a record's value back into the event's JSON (readAll).
	decode func(value []byte) []byte
}

// newEOHarnessOn is newEOHarness with the relays on source; with the cdc source their
// replication connections go through their pausing proxies too, and the publication and slots
// are dropped with the test.
func newEOHarnessOn(t testing.TB, source forwarder.Source) *eoHarness {
	h := newEOHarness(t)
	h.source = source
	if source == forwarder.SourceCDC {
		t.Cleanup(func() { testsupport.DropCDCObjects(t, h.db, h.writer.Table()) }) // after the relays stopped
	}
	return h
}

// ready waits, on the cdc source, until a relay streams the slot (what is written from then on
// goes through the stream, not the drain of a fresh slot).
func (h *eoHarness) ready() {
	h.t.Helper()
	if h.source == forwarder.SourceCDC {
		testsupport.WaitForCDCStream(h.t, h.db, h.writer.Table(), 0)
	}
}

func newEOHarness(t testing.TB) *eoHarness {
	t.Helper()
	dsn := testsupport.PostgresDSN(t)
	db := testsupport.OpenPostgres(t)
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: testsupport.UniqueName("eo")})
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(context.Background(), db, w.Table()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tbl := w.Table()
		for _, n := range tbl.Tables() {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + n)
		}
	})
	return &eoHarness{t: t, dsn: dsn, db: db, writer: w, brokers: testsupport.KafkaBrokers(t),
		topic: testsupport.UniqueName("eo-events"), checkpoint: sharedCheckpointTopic}
}

type eoBody struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

// write commits n events for each key, key by key interleaved, one transaction per round.
func (h *eoHarness) write(keys []string, from, n int) {
	h.t.Helper()
	ctx := context.Background()
	for i := from; i < from+n; i++ {
		tx, err := h.db.BeginTx(ctx, nil)
		if err != nil {
			h.t.Fatal(err)
		}
		for _, k := range keys {
			e, err := outbox.NewJSONEvent(h.topic, "order", k, "OrderChanged", eoBody{Key: k, N: i})
			if err != nil {
				h.t.Fatal(err)
			}
			e.ID = uuid.Must(uuid.NewV7())
			if err := h.writer.WriteTx(ctx, tx, e); err != nil {
				h.t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *eoHarness) pendingRows() int {
	var n int
	if err := h.db.QueryRow("SELECT count(*) FROM " + h.writer.Table().Events() + " WHERE status = 0").Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// relay is one in-process relay with a pausable database connection.
type relay struct {
	proxy   *pausingProxy
	pub     *Publisher
	metrics *prometheus.Registry
	stop    func()
}

// startRelay runs an exactly-once relay on tp (a wrapper of its own publisher, or nil for the
// publisher itself).
func (h *eoHarness) startRelay(id string, wrap func(*Publisher) forwarder.TransactionalPublisher) *relay {
	h.t.Helper()
	proxy := newPausingProxy(h.t, h.dsn)
	db, err := sql.Open("pgx", proxy.dsn)
	if err != nil {
		h.t.Fatal(err)
	}
	pub, err := NewPublisher(Config{Brokers: h.brokers, MessageMaxBytes: h.maxBytes}, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	isRetriable := Retriable
	if h.publisherClassifies {
		isRetriable = nil
	}
	var tp forwarder.TransactionalPublisher = pub
	if wrap != nil {
		tp = wrap(pub)
	}
	f, err := forwarder.New(forwarder.Config{
		DB: db, Dialect: outbox.Postgres, Table: h.writer.Table().Events(), Publisher: tp, RelayID: id,
		Delivery: forwarder.ExactlyOnce, CheckpointTopic: h.checkpoint, TransactionalIDPrefix: h.prefix, Metrics: reg, DeadLetterTopic: h.topic + "-dlq",
		TransactionalUnits: harnessUnits,
		IsRetriable:        isRetriable,
		LeaseTTL:           2 * time.Second, HeartbeatInterval: 200 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond,
		InitialInterval: 20 * time.Millisecond, MaxInterval: 200 * time.Millisecond, BatchSize: 200,
		Source: h.source, CDC: h.cdcConfig(proxy.dsn), TracerProvider: h.tracer, MessagingSystem: "kafka",
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("relay", id),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	var once sync.Once
	r := &relay{proxy: proxy, pub: pub, metrics: reg}
	r.stop = func() {
		once.Do(func() {
			proxy.resume()
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("relay %s: %v", id, err)
			}
			_ = pub.Close()
			_ = db.Close()
		})
	}
	h.t.Cleanup(r.stop)
	return r
}

// cdcConfig is the relays' CDC settings on the cdc source, replicating through dsn.
func (h *eoHarness) cdcConfig(dsn string) forwarder.CDCConfig {
	if h.source != forwarder.SourceCDC {
		return forwarder.CDCConfig{}
	}
	return forwarder.CDCConfig{DSN: dsn, StatusInterval: 200 * time.Millisecond, RetryInterval: 50 * time.Millisecond}
}

// consumed is one record read back.
type consumed struct {
	key, id string
	n       int
	headers map[string]string
}

// readAll reads the topic from the start with the given isolation until idle for idle after
// want distinct events arrived (or the timeout passed).
func (h *eoHarness) readAll(topic string, committed bool, want int, timeout time.Duration) []consumed {
	h.t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(h.brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond)}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		h.t.Fatal(err)
	}
	defer client.Close()
	deadline := time.Now().Add(timeout)
	var out []consumed
	ids := map[string]bool{}
	quiet := time.Time{}
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fetches := client.PollFetches(ctx)
		cancel()
		n := 0
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			c := consumed{key: string(r.Key), headers: map[string]string{}}
			for _, hd := range r.Headers {
				c.headers[hd.Key] = string(hd.Value)
				if hd.Key == outbox.MetadataEventID {
					c.id = string(hd.Value)
				}
			}
			value := r.Value
			if h.decode != nil {
				value = h.decode(value)
			}
			var b eoBody
			if json.Unmarshal(value, &b) == nil {
				c.n = b.N
			}
			ids[c.id] = true
			out = append(out, c)
		})
		switch {
		case len(ids) < want:
			quiet = time.Time{}
		case n > 0 || quiet.IsZero():
			quiet = time.Now()
		case time.Since(quiet) > 2*time.Second:
			return out
		}
	}
	return out
}

// checkExactlyOnce fails the test unless every key's events 0..perKey-1 arrived once each, in
// order.
func checkExactlyOnce(t testing.TB, got []consumed, keys []string, perKey int) {
	t.Helper()
	next := map[string]int{}
	seen := map[string]bool{}
	dups := 0
	for _, c := range got {
		if seen[c.id] {
			dups++
			continue
		}
		seen[c.id] = true
		if c.n != next[c.key] {
			t.Fatalf("key %s: event n=%d arrived when n=%d was expected (order violated or event lost)", c.key, c.n, next[c.key])
		}
		next[c.key]++
	}
	for _, k := range keys {
		if next[k] != perKey {
			t.Errorf("key %s: %d of %d events delivered", k, next[k], perKey)
		}
	}
	if dups > 0 {
		t.Errorf("a read_committed consumer saw %d duplicates", dups)
	}
}

// pausingProxy forwards TCP connections to the database and can stop forwarding, so that a
// relay's queries stall as those of a stopped process do, while the database sees its sessions
// open and idle.
type pausingProxy struct {
	dsn    string
	mu     sync.Mutex
	paused bool
	cond   *sync.Cond
}

func newPausingProxy(t testing.TB, dsn string) *pausingProxy {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	u.Host = ln.Addr().String()
	p := &pausingProxy{dsn: u.String()}
	p.cond = sync.NewCond(&p.mu)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c, target)
		}
	}()
	return p
}

func (p *pausingProxy) serve(c net.Conn, target string) {
	defer c.Close()
	d, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer d.Close()
	done := make(chan struct{}, 2)
	go func() { p.copy(d, c); done <- struct{}{} }()
	go func() { p.copy(c, d); done <- struct{}{} }()
	<-done
}

func (p *pausingProxy) copy(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.paused {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *pausingProxy) pause() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

func (p *pausingProxy) resume() {
	p.mu.Lock()
	p.paused = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// hookedPublisher runs hooks around a Publisher's transactional calls: the crash points.
type hookedPublisher struct {
	*Publisher
	// failOpen, when it returns an error, makes OpenUnit fail with it before opening anything.
	failOpen     func(unit string) error
	afterOpen    func(unit string)
	beforeCommit func(unit string)
	afterCommit  func(unit string)
}

func (h *hookedPublisher) OpenUnit(ctx context.Context, unit, topic string, slot int) ([]byte, error) {
	if h.failOpen != nil {
		if err := h.failOpen(unit); err != nil {
			return nil, err
		}
	}
	last, err := h.Publisher.OpenUnit(ctx, unit, topic, slot)
	if err == nil && h.afterOpen != nil {
		h.afterOpen(unit)
	}
	return last, err
}

func (h *hookedPublisher) CommitUnit(ctx context.Context, unit string, topics []string, msgs []*message.Message, cp []byte) ([]error, error) {
	if h.beforeCommit != nil {
		h.beforeCommit(unit)
	}
	errs, err := h.Publisher.CommitUnit(ctx, unit, topics, msgs, cp)
	if err == nil && h.afterCommit != nil {
		h.afterCommit(unit)
	}
	return errs, err
}
