package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// walWriteKinds are the three ways an event reaches the WAL: the Go writer through database/sql,
// the Go writer queued into the business statement's pgx batch, and the SQL function of writers
// in other languages.
var walWriteKinds = []string{"database/sql WriteTx", "pgx QueuePgx", "SQL <table>_emit"}

// walWrite is one business transaction with one event, and how it ended.
type walWrite struct {
	kind string
	id   string
	// afterLoss: the transaction began after the test had seen the slot gone or invalidated.
	afterLoss bool
	err       error
}

// writeWAL runs one business transaction (a business row whose id is the event's, and the
// event) of kind on tg.
func writeWAL(ctx context.Context, tg walTarget, conn *pgx.Conn, kind string, ev outbox.Event) error {
	insert := "INSERT INTO " + tg.business + " (id, total) VALUES ($1, 1)"
	if kind == "pgx QueuePgx" {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		batch := &pgx.Batch{}
		batch.Queue(insert, ev.ID.String())
		if err := tg.writer.QueuePgx(batch, ev); err != nil {
			return err
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	tx, err := tg.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, insert, ev.ID.String()); err != nil {
		return err
	}
	if kind == "SQL <table>_emit" {
		headers, _ := json.Marshal(ev.Headers)
		_, err = tx.ExecContext(ctx, "SELECT "+tg.writer.Table().WALEmitFunction()+"($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9)",
			ev.Topic, ev.AggregateType, ev.AggregateID, ev.EventType, ev.Payload, string(headers), ev.TenantID, ev.ID.String(), ev.CreatedAt)
	} else {
		err = tg.writer.WriteTx(ctx, tx, ev)
	}
	if err != nil {
		return err
	}
	return tx.Commit()
}

// walWriters runs one writer per write kind, each on its own connections, until stop. The test
// calls lost once the slot is gone or invalidated; from then on each write is marked afterLoss.
type walWriters struct {
	results           chan walWrite
	lossSeen, stopped atomic.Bool
	wg                sync.WaitGroup
}

func startWALWriters(t *testing.T, tg walTarget, dsn string) *walWriters {
	t.Helper()
	ctx := context.Background()
	w := &walWriters{results: make(chan walWrite, 1024)}
	for _, kind := range walWriteKinds {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer conn.Close(ctx)
			for i := 0; !w.stopped.Load(); i++ {
				ev := walEvent("key-" + kind)
				after := w.lossSeen.Load()
				err := writeWAL(ctx, tg, conn, kind, ev)
				w.results <- walWrite{kind: kind, id: ev.ID.String(), afterLoss: after, err: err}
			}
		}()
	}
	t.Cleanup(func() { w.stop() })
	return w
}

// until reads results until done says enough, and returns them; 20,000 writes without that
// fail the test (with the last error seen).
func (w *walWriters) until(t *testing.T, done func(seen []walWrite) bool) []walWrite {
	t.Helper()
	var seen []walWrite
	for r := range w.results {
		seen = append(seen, r)
		if done(seen) {
			return seen
		}
		if len(seen) == 20000 {
			t.Fatalf("20,000 writes and still not done; the last: %s, error %v", r.kind, r.err)
		}
	}
	return seen
}

// stop stops the writers and returns the results not read yet.
func (w *walWriters) stop() []walWrite {
	w.stopped.Store(true)
	var rest []walWrite
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	for {
		select {
		case r := <-w.results:
			rest = append(rest, r)
		case <-done:
			for {
				select {
				case r := <-w.results:
					rest = append(rest, r)
				default:
					return rest
				}
			}
		}
	}
}

// committedOfEach is a done function: at least n committed writes of every kind.
func committedOfEach(n int) func([]walWrite) bool {
	return func(seen []walWrite) bool { return countOfEach(seen, n, func(r walWrite) bool { return r.err == nil }) }
}

// refusedAfterLossOfEach is a done function: at least n writes of every kind begun after the loss.
func refusedAfterLossOfEach(n int) func([]walWrite) bool {
	return func(seen []walWrite) bool { return countOfEach(seen, n, func(r walWrite) bool { return r.afterLoss }) }
}

func countOfEach(seen []walWrite, n int, match func(walWrite) bool) bool {
	count := map[string]int{}
	for _, r := range seen {
		if match(r) {
			count[r.kind]++
		}
	}
	for _, kind := range walWriteKinds {
		if count[kind] < n {
			return false
		}
	}
	return true
}

// checkRefusedAfterLoss: every write begun after the loss failed with an error naming the slot
// and saying why, and left no business row (the transaction could not commit); every write that
// committed left its business row.
func checkRefusedAfterLoss(t *testing.T, tg walTarget, writes []walWrite, slot, why string) {
	t.Helper()
	committed, refused := 0, 0
	for _, r := range writes {
		var exists bool
		if err := tg.db.QueryRow("SELECT EXISTS (SELECT 1 FROM "+tg.business+" WHERE id = $1)", r.id).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if exists != (r.err == nil) {
			t.Errorf("%s write %s: error %v, business row committed: %v", r.kind, r.id, r.err, exists)
		}
		if r.err == nil {
			committed++
		}
		if !r.afterLoss {
			continue
		}
		refused++
		if r.err == nil {
			t.Errorf("%s write %s began after the slot was lost and committed: its event is lost silently", r.kind, r.id)
		} else if msg := r.err.Error(); !strings.Contains(msg, `"`+slot+`"`) || !strings.Contains(msg, why) {
			t.Errorf("%s write after the loss: the error should name slot %q and say %q: %v", r.kind, slot, why, r.err)
		}
	}
	t.Logf("%d writes: %d committed, %d begun after the slot was lost (all refused unless reported above)", len(writes), committed, refused)
}

// TestWALWritesAreRefusedWithoutASlot: before the slot is created, every write path fails with
// an error saying so (the Go writer naming its slot, <table>_emit saying none is registered), and
// the business transaction cannot commit, even when the caller ignores the batch's error and
// commits anyway.
func TestWALWritesAreRefusedWithoutASlot(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	dsn := testsupport.PostgresDSN(t)
	tg := newWALTarget(t, db, testsupport.UniqueName("walg"))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, kind := range walWriteKinds {
		want := `replication slot "` + tg.slot + `" of the outbox ` + tg.writer.Table().String() + " does not exist in this database and was never registered"
		if kind == "SQL <table>_emit" {
			want = "no replication slot is registered for the outbox " + tg.writer.Table().String()
		}
		if err := writeWAL(ctx, tg, conn, kind, walEvent("k-1")); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s without a slot: want an error containing %q, got %v", kind, want, err)
		}
	}
	// A careless caller: the batch's error ignored, then COMMIT.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	batch := &pgx.Batch{}
	batch.Queue("INSERT INTO " + tg.business + " (id, total) VALUES ('careless', 1)")
	if err := tg.writer.QueuePgx(batch, walEvent("k-2")); err != nil {
		t.Fatal(err)
	}
	_ = tx.SendBatch(ctx, batch).Close()
	if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxCommitRollback) {
		t.Errorf("COMMIT after a refused emit: want pgx.ErrTxCommitRollback, got %v", err)
	}
	var rows int
	if err := db.QueryRow("SELECT count(*) FROM " + tg.business).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("%d business rows committed without their events", rows)
	}
	st, err := outbox.ReadWALSlot(ctx, db, tg.writer.Table(), "never_created")
	if err != nil || st.Registered || st.Exists || st.Lost() {
		t.Errorf("ReadWALSlot of an unknown slot: %+v, %v", st, err)
	}
}
