package kafka

import (
	"bytes"
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// newInstallationHarness is an exactly-once harness whose outbox table is table, unqualified,
// in a schema of its own: its connections find the table through their search_path, as a
// service with its own schema (or database) and the default table name does.
func newInstallationHarness(t *testing.T, schema, table string) *eoHarness {
	t.Helper()
	adm := testsupport.OpenPostgres(t)
	if _, err := adm.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.Exec("DROP SCHEMA " + schema + " CASCADE") })
	u, err := url.Parse(testsupport.PostgresDSN(t))
	if err != nil {
		t.Fatalf("the test DSN is not a URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	dsn := u.String()
	db := testsupport.OpenDSN(t, "pgx", dsn)
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(context.Background(), db, w.Table()); err != nil {
		t.Fatal(err)
	}
	return &eoHarness{t: t, dsn: dsn, db: db, writer: w, brokers: testsupport.KafkaBrokers(t),
		topic: testsupport.UniqueName("eo-events"), checkpoint: sharedCheckpointTopic}
}

// TestExactlyOnceInstallationsAreIsolated: two services, each with its own schema, the same
// table name, the default lease group and transactional-id prefix, exactly-once into one Kafka.
// The second one's relay must not apply the first one's checkpoints to its own table (which
// deleted its rows unpublished: they share sequence numbers), nor fence it by a shared name.
func TestExactlyOnceInstallationsAreIsolated(t *testing.T) {
	table := testsupport.UniqueName("eo_inst")
	a := newInstallationHarness(t, table+"_a", table)
	b := newInstallationHarness(t, table+"_b", table)
	keys := eoKeys(20)

	a.write(keys, 0, 10)
	ra := a.startRelay("eo-inst-a", nil)
	a.waitDrained(2 * time.Minute)
	ra.stop()

	b.write(keys, 0, 10)
	rb := b.startRelay("eo-inst-b", nil)
	b.waitDrained(2 * time.Minute)
	// Both at once, with restarts: each relay's units must be its own.
	ra = a.startRelay("eo-inst-a2", nil)
	a.write(keys, 10, 10)
	b.write(keys, 10, 10)
	rb.stop()
	rb = b.startRelay("eo-inst-b2", nil)
	a.waitDrained(2 * time.Minute)
	b.waitDrained(2 * time.Minute)
	ra.stop()
	rb.stop()

	checkExactlyOnce(t, a.readAll(a.topic, true, len(keys)*20, 60*time.Second), keys, 20)
	checkExactlyOnce(t, b.readAll(b.topic, true, len(keys)*20, 60*time.Second), keys, 20)
}

// TestExactlyOnceRefusesAnotherInstallationsCheckpoint: two installations whose relays were
// given the same transactional-id prefix share unit names. The second one must refuse the
// first one's checkpoint loudly (its rows are not its own) and delete nothing of its own
// table; its events wait, pending.
func TestExactlyOnceRefusesAnotherInstallationsCheckpoint(t *testing.T) {
	table := testsupport.UniqueName("eo_shared")
	a := newInstallationHarness(t, table+"_a", table)
	b := newInstallationHarness(t, table+"_b", table)
	a.prefix, b.prefix = "outboxkit-test/"+table, "outboxkit-test/"+table
	keys := eoKeys(8)
	a.write(keys, 0, 5)
	ra := a.startRelay("eo-shared-a", nil)
	a.waitDrained(2 * time.Minute)
	ra.stop()

	b.write(keys, 0, 5)
	rb := b.startRelay("eo-shared-b", nil)
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	for rb.counter("outboxkit_forwarder_foreign_checkpoints_total") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no foreign checkpoint counted after 2 minutes; %d of %d rows pending", b.pendingRows(), len(keys)*5)
		}
		time.Sleep(100 * time.Millisecond)
	}
	rb.stop()
	if n := b.pendingRows(); n != len(keys)*5 {
		t.Fatalf("%d rows of the second installation pending, want all %d: its relay applied the first one's checkpoint",
			n, len(keys)*5)
	}
	// outboxkit status shows it: the units whose last checkpoint is the first installation's.
	adm, err := admin.New(b.db, outbox.Postgres, table)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := NewPublisher(Config{Brokers: b.brokers}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	units, err := adm.Units(context.Background(), pub, admin.UnitsQuery{TransactionalIDPrefix: b.prefix, CheckpointTopic: b.checkpoint})
	if err != nil {
		t.Fatal(err)
	}
	foreign := 0
	for _, u := range units {
		if u.Checkpoint != nil && u.Checkpoint.Foreign {
			foreign++
		}
	}
	if foreign == 0 {
		t.Errorf("Admin.Units reports no unit with a foreign checkpoint: %+v", units)
	}
}

// TestExactlyOnceReplayIsNotUndoneByARestart: an event dead-lettered in an exactly-once
// transaction is replayed by an operator while the relays are stopped. The next relay's opening
// of the unit must not apply that transaction's checkpoint again (which marked the replayed row
// dead once more): the replayed event is published.
func TestExactlyOnceReplayIsNotUndoneByARestart(t *testing.T) {
	h := newEOHarness(t)
	h.maxBytes = 64 << 10
	big := outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: h.topic, AggregateType: "order", AggregateID: "key-big",
		EventType: "OrderChanged", Payload: bytes.Repeat([]byte("x"), 100<<10)}
	tx, err := h.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.writer.WriteTx(context.Background(), tx, big); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	r := h.startRelay("eo-replay-1", nil)
	status := func() int {
		var s int
		if err := h.db.QueryRow("SELECT COALESCE(MAX(status), -1) FROM "+h.writer.Table().Events()+" WHERE event_id = $1", big.ID).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	for status() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the oversized event is not dead after 2 minutes (status %d)", status())
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.stop()

	adm, err := admin.New(h.db, outbox.Postgres, h.writer.Table().Events())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := adm.Replay(context.Background(), big.ID); err != nil || n != 1 {
		t.Fatalf("replay: %d rows, %v", n, err)
	}
	h.maxBytes = 0 // the operator raised the limit: the event fits now
	r = h.startRelay("eo-replay-2", nil)
	deadline = time.Now().Add(2 * time.Minute)
	for s := status(); s != -1; s = status() {
		if time.Now().After(deadline) || s == 2 {
			t.Fatalf("the replayed event was not published (status %d): the restart applied the old checkpoint again", s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.stop()
	if got := h.readAll(h.topic, true, 1, 2*time.Minute); len(got) != 1 || got[0].id != big.ID.String() {
		t.Fatalf("topic holds %v, want the replayed event once", got)
	}
}
