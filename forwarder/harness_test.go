package forwarder_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/go-sql-driver/mysql"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/internal/testsupport/forwardertest"
	"github.com/outboxkit/outboxkit/internal/testsupport/testdb"
	"github.com/outboxkit/outboxkit/outbox"
)

// harness is one real database with a fresh outbox table, and a Kafka cluster (real or kfake).
type harness struct {
	t       testing.TB
	dialect outbox.Dialect
	db      *sql.DB
	writer  *outbox.Writer
	brokers []string
	topic   string
	// source is the forwarders' source (config); "" is polling.
	source forwarder.Source
	// txWriter writes the events of write and tryWrite; nil is writer (a plain-SQL writer
	// in sqlwriters_test.go).
	txWriter testsupport.TxWriter
}

// kfakeBrokers starts an in-process Kafka cluster for the test.
func kfakeBrokers(t testing.TB) []string {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	return cluster.ListenAddrs()
}

func newHarness(t testing.TB, dialect outbox.Dialect, brokers []string) *harness {
	t.Helper()
	db := testdb.Open(t, dialect)
	w := testsupport.NewOutbox(t, db, outbox.Config{Dialect: dialect, Table: testsupport.UniqueName("fwd")})
	return &harness{t: t, dialect: dialect, db: db, writer: w, brokers: brokers, topic: testsupport.UniqueName("events")}
}

// body is the payload of test events: the key and its per-key sequence number.
type body = forwardertest.Body

func (h *harness) event(key string, n int) outbox.Event {
	return forwardertest.Event(h.t, h.topic, key, n)
}

// write commits the events in one transaction.
func (h *harness) write(events ...outbox.Event) {
	h.t.Helper()
	if err := h.tryWrite(events...); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) tryWrite(events ...outbox.Event) error {
	var w testsupport.TxWriter = h.writer
	if h.txWriter != nil {
		w = h.txWriter
	}
	return testsupport.WriteEvents(context.Background(), h.db, w, events...)
}

func (h *harness) publisher() message.Publisher {
	return forwardertest.KafkaPublisher(h.t, h.brokers)
}

// config returns a forwarder config for the harness with quick test timings.
func (h *harness) config(pub message.Publisher) forwarder.Config {
	cfg := forwardertest.Config(h.db, h.dialect, h.writer.Table().Events(), pub)
	cfg.Source, cfg.CDC = h.source, h.cdcConfig()
	if h.source == forwarder.SourceWAL {
		cfg.WAL = forwarder.WALConfig{DSN: testsupport.PostgresDSN(h.t), StatusInterval: 200 * time.Millisecond, RetryInterval: 50 * time.Millisecond}
	}
	return cfg
}

// scheduler is the writer that cancels and reschedules the harness's scheduled events: the one
// that writes them (the wal source's ModeWAL writer), or writer.
func (h *harness) scheduler() *outbox.Writer {
	if w, ok := h.txWriter.(*outbox.Writer); ok {
		return w
	}
	return h.writer
}

// start runs a forwarder until the returned stop function is called (or the test ends); stop
// waits for Run to return and fails the test if Run returned an error.
func (h *harness) start(cfg forwarder.Config) (stop func()) {
	h.t.Helper()
	return forwardertest.Start(h.t, cfg)
}

// received is one consumed Kafka record.
type received struct {
	key     string
	n       int
	eventID string
	headers map[string]string
	payload []byte
}

// consume reads topic from the start until want records arrived or the timeout passed.
func consume(t testing.TB, brokers []string, topic string, want int, timeout time.Duration) []received {
	t.Helper()
	return consumeUntil(t, brokers, topic, func(got []received) bool { return len(got) >= want }, timeout)
}

// consumeDistinct reads topic from the start until want distinct events arrived (duplicates do
// not count) or the timeout passed.
func consumeDistinct(t testing.TB, brokers []string, topic string, want int, timeout time.Duration) []received {
	t.Helper()
	return consumeUntil(t, brokers, topic, func(got []received) bool {
		ids := map[string]bool{}
		for _, r := range got {
			ids[r.eventID] = true
		}
		return len(ids) >= want
	}, timeout)
}

// consumeUntil reads topic from the start until done says so or the timeout passed.
func consumeUntil(t testing.TB, brokers []string, topic string, done func([]received) bool, timeout time.Duration) []received {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []received
	for !done(out) && ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		fetches.EachRecord(func(r *kgo.Record) {
			rec := received{key: string(r.Key), headers: map[string]string{}, payload: r.Value}
			for _, hd := range r.Headers {
				rec.headers[hd.Key] = string(hd.Value)
			}
			rec.eventID = rec.headers[outbox.MetadataEventID]
			var b body
			if json.Unmarshal(r.Value, &b) == nil {
				rec.n = b.N
			}
			out = append(out, rec)
		})
	}
	return out
}

// checkDelivery asserts every key's events 0..perKey-1 arrived, that the first delivery of each
// event came in per-key order, and returns the number of duplicate deliveries.
func checkDelivery(t testing.TB, got []received, keys []string, perKey int) (duplicates int) {
	t.Helper()
	next := map[string]int{}
	seen := map[string]bool{}
	for _, r := range got {
		if seen[r.eventID] {
			duplicates++
			continue
		}
		seen[r.eventID] = true
		if r.n != next[r.key] {
			t.Fatalf("key %s: event n=%d arrived when n=%d was expected next (order violated or event lost)", r.key, r.n, next[r.key])
		}
		next[r.key]++
	}
	for _, k := range keys {
		if next[k] != perKey {
			t.Fatalf("key %s: %d of %d events delivered", k, next[k], perKey)
		}
	}
	return duplicates
}

// pendingRows counts rows still in the outbox with the given status.
func (h *harness) rowsWithStatus(status int) int {
	h.t.Helper()
	var n int
	if err := h.db.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE status = %d", h.writer.Table().Events(), status)).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

func keysNamed(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return keys
}

// waitForOwners waits until n distinct relays own partitions of the table.
func (h *harness) waitForOwners(n int) {
	h.t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	for {
		var owners int
		if err := h.db.QueryRow("SELECT COUNT(DISTINCT owner) FROM " + h.writer.Table().Leases() +
			" WHERE owner IS NOT NULL").Scan(&owners); err != nil {
			h.t.Fatal(err)
		}
		if owners >= n {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("after 2 minutes only %d of %d relays own partitions", owners, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// span is the time one publish call took, from its start to its return.
type span struct{ start, end time.Time }

// recordingPublisher wraps a publisher and records the span of every Publish call, sleeping
// delay inside each call first (a slow broker) when delay is set. Wrap a publisher with
// recording: a publisher that also reports per-message outcomes (forwarder.OutcomePublisher)
// then gets a wrapper that records PublishEach calls as well, so the forwarder takes the same
// path with and without the wrapper.
type recordingPublisher struct {
	message.Publisher
	delay time.Duration
	mu    sync.Mutex
	spans []span
}

func (p *recordingPublisher) record(start time.Time) {
	end := time.Now()
	p.mu.Lock()
	p.spans = append(p.spans, span{start, end})
	p.mu.Unlock()
}

func (p *recordingPublisher) Publish(topic string, msgs ...*message.Message) error {
	defer p.record(time.Now())
	time.Sleep(p.delay)
	return p.Publisher.Publish(topic, msgs...)
}

// calls returns a copy of the recorded spans.
func (p *recordingPublisher) calls() []span {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]span(nil), p.spans...)
}

// recordingOutcomePublisher is a recordingPublisher for a publisher with PublishEach.
type recordingOutcomePublisher struct {
	*recordingPublisher
	each forwarder.OutcomePublisher
}

func (p recordingOutcomePublisher) PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error {
	defer p.record(time.Now())
	time.Sleep(p.delay)
	return p.each.PublishEach(ctx, topic, msgs)
}

// recording wraps pub in a recordingPublisher (with PublishEach if pub has it) and returns the
// wrapper to give the forwarder and the recorder to read.
func recording(pub message.Publisher, delay time.Duration) (message.Publisher, *recordingPublisher) {
	rec := &recordingPublisher{Publisher: pub, delay: delay}
	if each, ok := pub.(forwarder.OutcomePublisher); ok {
		return recordingOutcomePublisher{rec, each}, rec
	}
	return rec, rec
}

// longestOverlap returns the longest time one call of a and one call of b ran at once, and the
// number of pairs of calls that overlapped at all.
func longestOverlap(a, b []span) (longest time.Duration, pairs int) {
	for _, x := range a {
		for _, y := range b {
			start, end := x.start, x.end
			if y.start.After(start) {
				start = y.start
			}
			if y.end.Before(end) {
				end = y.end
			}
			if d := end.Sub(start); d > 0 {
				pairs++
				longest = max(longest, d)
			}
		}
	}
	return longest, pairs
}

// ownedBy returns how many partitions each owner holds.
func (h *harness) ownedBy() map[string]int {
	h.t.Helper()
	rows, err := h.db.Query("SELECT owner, COUNT(*) FROM " + h.writer.Table().Leases() + " WHERE owner IS NOT NULL GROUP BY owner")
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var owner string
		var n int
		if err := rows.Scan(&owner, &n); err != nil {
			h.t.Fatal(err)
		}
		out[owner] = n
	}
	if err := rows.Err(); err != nil {
		h.t.Fatal(err)
	}
	return out
}

// lockWaitWatch gives each relay of a test its own connection pool, named so that the database
// tells the relays' connections apart (an application_name on PostgreSQL; on MariaDB, the local
// ports of a dialer of its own), and samples the database for lock waits of one relay's
// connection on another relay's.
type lockWaitWatch struct {
	t     testing.TB
	h     *harness
	apps  []string
	mu    sync.Mutex
	ports map[int]int // MariaDB: local port of a connection -> relay
}

func newLockWaitWatch(t testing.TB, h *harness) *lockWaitWatch {
	return &lockWaitWatch{t: t, h: h, ports: map[int]int{}}
}

// relayDB opens relay i's connection pool, closed with the test.
func (w *lockWaitWatch) relayDB(i int) *sql.DB {
	w.t.Helper()
	var db *sql.DB
	var err error
	switch w.h.dialect {
	case outbox.Postgres:
		app := testsupport.UniqueName(fmt.Sprintf("relay%d", i))
		w.apps = append(w.apps, app)
		dsn, perr := url.Parse(testsupport.PostgresDSN(w.t))
		if perr != nil {
			w.t.Fatal(perr)
		}
		q := dsn.Query()
		q.Set("application_name", app)
		dsn.RawQuery = q.Encode()
		db, err = sql.Open("pgx", dsn.String())
	case outbox.MySQL:
		cfg, perr := mysql.ParseDSN(testsupport.MySQLDSN(w.t))
		if perr != nil {
			w.t.Fatal(perr)
		}
		network := testsupport.UniqueName(fmt.Sprintf("relay%d", i))
		mysql.RegisterDialContext(network, func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
			if err == nil {
				if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
					w.mu.Lock()
					w.ports[a.Port] = i
					w.mu.Unlock()
				}
			}
			return c, err
		})
		cfg.Net = network
		db, err = sql.Open("mysql", cfg.FormatDSN())
	default:
		w.t.Fatalf("lockWaitWatch: dialect %s", w.h.dialect)
	}
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = db.Close() })
	return db
}

// start samples every 10 ms until the returned stop is called; stop returns a description of
// each lock wait seen between two relays.
func (w *lockWaitWatch) start() (stop func() []string) {
	done := make(chan struct{})
	result := make(chan []string, 1)
	go func() {
		var waits []string
		failures := 0
		for {
			select {
			case <-done:
				result <- waits
				return
			case <-time.After(10 * time.Millisecond):
			}
			seen, err := w.sample()
			if err != nil {
				if failures++; failures == 1 {
					w.t.Logf("lock wait sample: %v", err)
				}
				continue
			}
			waits = append(waits, seen...)
		}
	}()
	return func() []string { close(done); return <-result }
}

func (w *lockWaitWatch) sample() ([]string, error) {
	if w.h.dialect == outbox.Postgres {
		rows, err := w.h.db.Query(`SELECT a.application_name, b.application_name, left(coalesce(a.query, ''), 120)
			FROM pg_stat_activity a JOIN pg_stat_activity b ON b.pid = ANY(pg_blocking_pids(a.pid))
			WHERE a.application_name IN ($1, $2) AND b.application_name IN ($1, $2) AND a.application_name <> b.application_name`,
			w.apps[0], w.apps[1])
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var waiter, holder, query string
			if err := rows.Scan(&waiter, &holder, &query); err != nil {
				return nil, err
			}
			out = append(out, fmt.Sprintf("%s waits for %s in %q", waiter, holder, query))
		}
		return out, rows.Err()
	}
	type wait struct {
		waiter, holder int64
		query          string
	}
	rows, err := w.h.db.Query(`SELECT r.trx_mysql_thread_id, b.trx_mysql_thread_id, COALESCE(r.trx_query, '')
		FROM information_schema.INNODB_LOCK_WAITS lw
		JOIN information_schema.INNODB_TRX r ON r.trx_id = lw.requesting_trx_id
		JOIN information_schema.INNODB_TRX b ON b.trx_id = lw.blocking_trx_id`)
	if err != nil {
		return nil, err
	}
	var waits []wait
	for rows.Next() {
		var x wait
		if err := rows.Scan(&x.waiter, &x.holder, &x.query); err != nil {
			rows.Close()
			return nil, err
		}
		waits = append(waits, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(waits) == 0 {
		return nil, err
	}
	relayOf := map[int64]int{}
	procs, err := w.h.db.Query(`SELECT ID, SUBSTRING_INDEX(HOST, ':', -1) FROM information_schema.PROCESSLIST WHERE HOST LIKE '%:%'`)
	if err != nil {
		return nil, err
	}
	defer procs.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	for procs.Next() {
		var id int64
		var port int
		if err := procs.Scan(&id, &port); err != nil {
			return nil, err
		}
		if relay, ok := w.ports[port]; ok {
			relayOf[id] = relay
		}
	}
	var out []string
	for _, x := range waits {
		a, okA := relayOf[x.waiter]
		b, okB := relayOf[x.holder]
		if okA && okB && a != b {
			out = append(out, fmt.Sprintf("relay-%d waits for relay-%d in %q", a, b, x.query))
		}
	}
	return out, procs.Err()
}
