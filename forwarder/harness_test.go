package forwarder_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	_ "modernc.org/sqlite"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
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
}

func openDB(t testing.TB, dialect outbox.Dialect) *sql.DB {
	t.Helper()
	switch dialect {
	case outbox.Postgres:
		return testsupport.OpenPostgres(t)
	case outbox.MySQL:
		return testsupport.OpenMySQL(t)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "outbox.db")+
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// quietLogger keeps the forwarders' info logs out of the test output; warnings still show.
var quietLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

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
	db := openDB(t, dialect)
	name := testsupport.UniqueName("fwd")
	w, err := outbox.NewWriter(outbox.Config{Dialect: dialect, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(context.Background(), db, w.Table()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	t.Cleanup(func() {
		tbl := w.Table()
		for _, n := range []string{tbl.Events(), tbl.Leases(), tbl.Relays(), tbl.Migrations(), tbl.KeyLocks()} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + n)
		}
	})
	return &harness{t: t, dialect: dialect, db: db, writer: w, brokers: brokers, topic: testsupport.UniqueName("events")}
}

// body is the payload of test events: the key and its per-key sequence number.
type body struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

func (h *harness) event(key string, n int) outbox.Event {
	e, err := outbox.NewJSONEvent(h.topic, "order", key, "OrderChanged", body{Key: key, N: n})
	if err != nil {
		h.t.Fatal(err)
	}
	e.ID = uuid.Must(uuid.NewV7())
	return e
}

// write commits the events in one transaction.
func (h *harness) write(events ...outbox.Event) {
	h.t.Helper()
	if err := h.tryWrite(events...); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) tryWrite(events ...outbox.Event) error {
	ctx := context.Background()
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := h.writer.WriteTx(ctx, tx, events...); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (h *harness) publisher() message.Publisher {
	h.t.Helper()
	pub, err := kafka.NewPublisher(kafka.Config{Brokers: h.brokers}, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// config returns a forwarder config for the harness with quick test timings.
func (h *harness) config(pub message.Publisher) forwarder.Config {
	return forwarder.Config{
		DB: h.db, Dialect: h.dialect, Table: h.writer.Table().Events(), Publisher: pub,
		LeaseTTL: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond,
		InitialBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, BatchSize: 200,
		Logger: quietLogger,
	}
}

// start runs a forwarder until the returned stop function is called (or the test ends); stop
// waits for Run to return and fails the test if Run returned an error.
func (h *harness) start(cfg forwarder.Config) (stop func()) {
	h.t.Helper()
	f, err := forwarder.New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("forwarder.Run: %v", err)
			}
		})
	}
	h.t.Cleanup(stop)
	return stop
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
	deadline := time.Now().Add(30 * time.Second)
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
			h.t.Fatalf("after 30s only %d of %d relays own partitions", owners, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
