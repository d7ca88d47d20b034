package forwarder_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// Scheduled events relayed to the real Kafka from the three databases (docs/scheduled.md): not
// published before their time by the database's clock, a cancelled one never, a rolled-back
// cancel leaves the event to be published, a scheduled event holds no event of its key back,
// and events of one key released together go out in sequence order.

// dbClock reads the database's current time, the clock the relay releases scheduled events by.
func dbClock(t testing.TB, db *sql.DB, d outbox.Dialect) time.Time {
	t.Helper()
	q := map[outbox.Dialect]string{
		outbox.Postgres: "SELECT clock_timestamp()",
		outbox.MySQL:    "SELECT UTC_TIMESTAMP(6)",
		outbox.SQLite:   "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')",
	}[d]
	dest, get := outbox.TimeScanner()
	if err := db.QueryRow(q).Scan(dest); err != nil {
		t.Fatal(err)
	}
	at, err := get()
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// clockedPublisher notes the database's time at which each event was handed to the broker.
type clockedPublisher struct {
	forwarder.OutcomePublisher
	message.Publisher
	t       testing.TB
	db      *sql.DB
	dialect outbox.Dialect
	mu      sync.Mutex
	at      map[string]time.Time
}

func (p *clockedPublisher) note(msgs []*message.Message) {
	now := dbClock(p.t, p.db, p.dialect)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		if _, ok := p.at[m.UUID]; !ok {
			p.at[m.UUID] = now
		}
	}
}

func (p *clockedPublisher) PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error {
	p.note(msgs)
	return p.OutcomePublisher.PublishEach(ctx, topic, msgs)
}

func (p *clockedPublisher) Publish(topic string, msgs ...*message.Message) error {
	p.note(msgs)
	return p.Publisher.Publish(topic, msgs...)
}

func (p *clockedPublisher) publishedAt(id uuid.UUID) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.at[id.String()]
}

func TestScheduledEventsRelayed(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL, outbox.SQLite} {
		t.Run(string(d), func(t *testing.T) { testScheduledEventsRelayed(t, newHarness(t, d, brokers)) })
	}
	// The cdc source streams the scheduled rows' inserts (status 4): it keeps them in the table
	// until they are due (docs/cdc.md, scheduled events). The relay streams before the events
	// are written, so the stream, not the drain of a fresh slot, carries them.
	t.Run("cdc", func(t *testing.T) { testScheduledEventsRelayed(t, newCDCHarness(t, brokers)) })
	// The wal source: the ModeWAL writer stores a scheduled event as a row and emits the
	// others; the relay's drain releases the row when it is due.
	t.Run("wal", func(t *testing.T) { testScheduledEventsRelayed(t, newWALHarness(t, brokers)) })
}

func testScheduledEventsRelayed(t *testing.T, h *harness) {
	ctx := context.Background()
	kafkaPub := h.publisher()
	pub := &clockedPublisher{OutcomePublisher: kafkaPub.(forwarder.OutcomePublisher), Publisher: kafkaPub, t: t, db: h.db, dialect: h.dialect, at: map[string]time.Time{}}

	// Key "held": a scheduled event an hour ahead between two ordinary ones, which must not
	// wait for it. Key "together": five events due at the same time, written in one transaction.
	// Key "cancel": one cancelled, one whose cancel rolled back, and a last one due after both,
	// which shows that the relay released that key's due events before it. Every scheduled event
	// is written an hour ahead and cancelled (or not) before it is moved to its time in one
	// transaction: a relay already running (the cdc source's) cannot release one before its
	// cancel, however slow the machine.
	far := dbClock(t, h.db, h.dialect).Add(time.Hour)
	schedule := func(key string, n int) outbox.Event {
		e := h.event(key, n)
		e.DeliverAt = far
		return e
	}
	held := []outbox.Event{h.event("held", 0), schedule("held", 1), h.event("held", 2)}
	var together []outbox.Event
	for n := range 5 {
		together = append(together, schedule("together", n))
	}
	cancelled, keptByRollback, last := schedule("cancel", 0), schedule("cancel", 1), schedule("cancel", 2)
	cancel := func(commit bool, id uuid.UUID) {
		tx, err := h.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		res, err := h.scheduler().Cancel(ctx, wsql.TxFromStdSQL(tx), id)
		if err != nil || !slices.Equal(res.Changed, []uuid.UUID{id}) {
			t.Fatalf("cancel %s: %+v, %v", id, res, err)
		}
		if commit {
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// moveTo reschedules events to at in one transaction and notes their new time.
	moveTo := func(tx *sql.Tx, at time.Time, events ...*outbox.Event) {
		ids := make([]uuid.UUID, len(events))
		for i, e := range events {
			ids[i] = e.ID
			e.DeliverAt = at
		}
		if res, err := h.scheduler().Reschedule(ctx, wsql.TxFromStdSQL(tx), at, ids...); err != nil || len(res.Changed) != len(ids) {
			t.Fatalf("reschedule %v: %+v, %v", ids, res, err)
		}
	}
	h.writeAndStart(h.config(pub), func() {
		h.write(held...)
		h.write(together...)
		h.write(cancelled, keptByRollback, last)
		cancel(true, cancelled.ID)
		cancel(false, keptByRollback.ID)
		soon := dbClock(t, h.db, h.dialect).Add(1500 * time.Millisecond).Truncate(time.Microsecond)
		tx, err := h.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		for i := range together {
			moveTo(tx, soon, &together[i])
		}
		moveTo(tx, soon, &keptByRollback)
		moveTo(tx, soon.Add(500*time.Millisecond), &last)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	})
	// The held key's ordinary events arrive while its scheduled event waits an hour.
	got := consumeUntil(t, h.brokers, h.topic, func(got []received) bool {
		ids := eventIDs(got)
		return slices.Contains(ids, held[0].ID.String()) && slices.Contains(ids, held[2].ID.String())
	}, 30*time.Second)
	var heldIDs []string
	for _, r := range got {
		if r.key == "held" {
			heldIDs = append(heldIDs, r.eventID)
		}
	}
	if !slices.Equal(heldIDs, []string{held[0].ID.String(), held[2].ID.String()}) {
		t.Fatalf("key held: %v, want its two ordinary events %s and %s while %s waits", heldIDs, held[0].ID, held[2].ID, held[1].ID)
	}
	// Moved to now, it is published too.
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := h.scheduler().Reschedule(ctx, wsql.TxFromStdSQL(tx), time.Time{}, held[1].ID); err != nil || len(res.Changed) != 1 {
		t.Fatalf("reschedule: %+v, %v", res, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	want := slices.Concat([]outbox.Event{held[1]}, together, []outbox.Event{keptByRollback, last})
	got = consumeDistinct(t, h.brokers, h.topic, 2+len(want), 60*time.Second)
	byKey := map[string][]int{}
	seen := map[string]bool{}
	for _, r := range got {
		if r.eventID == cancelled.ID.String() {
			t.Errorf("the cancelled event %s was published", cancelled.ID)
		}
		if !seen[r.eventID] {
			seen[r.eventID] = true
			byKey[r.key] = append(byKey[r.key], r.n)
		}
	}
	if len(seen) != 2+len(want) {
		h.logRows()
		t.Fatalf("%d distinct events published, want %d", len(seen), 2+len(want))
	}
	if !slices.Equal(byKey["together"], []int{0, 1, 2, 3, 4}) {
		t.Errorf("events of one key due together arrived as %v, want sequence order 0..4", byKey["together"])
	}
	if !slices.Equal(byKey["cancel"], []int{1, 2}) {
		t.Errorf("key cancel: %v, want 1 (its cancel rolled back) then 2, never the cancelled 0", byKey["cancel"])
	}
	var late []time.Duration
	for _, e := range slices.Concat(together, []outbox.Event{keptByRollback, last}) {
		at := pub.publishedAt(e.ID)
		if at.Before(e.DeliverAt.Truncate(time.Microsecond)) {
			t.Errorf("event %s (key %s) was published at %s by the database's clock, before its time %s", e.ID, e.AggregateID, at, e.DeliverAt)
		}
		late = append(late, at.Sub(e.DeliverAt))
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	t.Logf("%s: published after deliver_at (database clock), min %s, median %s, max %s", h.dialect, late[0], late[len(late)/2], late[len(late)-1])
	if n := h.rowsWithStatus(4); n != 0 {
		t.Errorf("%d rows still scheduled, want 0", n)
	}
}

func eventIDs(got []received) []string {
	var out []string
	for _, r := range got {
		out = append(out, r.eventID)
	}
	return out
}

// Exactly-once delivery claims through the same release and claim: scheduled events come due,
// reach a read_committed consumer once each, not before their time; cancelled ones never.
func TestScheduledEventsExactlyOnce(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			h := newHarness(t, d, brokers)
			ctx := context.Background()
			start := dbClock(t, h.db, h.dialect)
			var due, cancelled []outbox.Event
			for i := range 20 {
				e := h.event(fmt.Sprintf("k%d", i%4), i)
				e.DeliverAt = start.Add(time.Second + time.Duration(i)*20*time.Millisecond).Truncate(time.Microsecond)
				if i%5 == 4 {
					cancelled = append(cancelled, e)
				} else {
					due = append(due, e)
				}
			}
			h.write(slices.Concat(due, cancelled)...)
			tx, err := h.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var ids []uuid.UUID
			for _, e := range cancelled {
				ids = append(ids, e.ID)
			}
			if res, err := h.writer.Cancel(ctx, wsql.TxFromStdSQL(tx), ids...); err != nil || len(res.Changed) != len(ids) {
				t.Fatalf("cancel: %+v, %v", res, err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}

			// The exactly-once deliverer needs the Kafka publisher itself: the database's clock is
			// read when each record is consumed instead, which is after its release.
			cfg := h.config(h.publisher())
			cfg.Delivery, cfg.IsRetriable = forwarder.ExactlyOnce, kafka.Retriable
			h.start(cfg)

			counts := map[string]int{}
			consumedAt := map[string]time.Time{}
			client, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...), kgo.ConsumeTopics(h.topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
				kgo.FetchMaxWait(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			wait, stop := context.WithTimeout(ctx, time.Minute)
			defer stop()
			for len(counts) < len(due) && wait.Err() == nil {
				fetches := client.PollFetches(wait)
				now := dbClock(t, h.db, h.dialect)
				fetches.EachRecord(func(r *kgo.Record) {
					for _, hd := range r.Headers {
						if hd.Key == outbox.MetadataEventID {
							counts[string(hd.Value)]++
							consumedAt[string(hd.Value)] = now
						}
					}
				})
			}
			for _, e := range cancelled {
				if counts[e.ID.String()] != 0 {
					t.Errorf("cancelled event %s was published", e.ID)
				}
			}
			for _, e := range due {
				if n := counts[e.ID.String()]; n != 1 {
					t.Errorf("event %s read %d times, want once", e.ID, n)
				}
				if at := consumedAt[e.ID.String()]; at.Before(e.DeliverAt) {
					t.Errorf("event %s consumed at %s by the database's clock, before its time %s", e.ID, at, e.DeliverAt)
				}
			}
		})
	}
}

// logRows logs the rows left in the table (a failing test's evidence).
func (h *harness) logRows() {
	h.t.Helper()
	rows, err := h.db.Query("SELECT seq, aggregate_id, status, attempts, next_attempt_at IS NOT NULL FROM " + h.writer.Table().Events() + " ORDER BY seq")
	if err != nil {
		h.t.Log(err)
		return
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var seq, status, attempts int
		var key string
		var marked bool
		if err := rows.Scan(&seq, &key, &status, &attempts, &marked); err != nil {
			h.t.Log(err)
			return
		}
		h.t.Logf("row left: seq %d, key %s, status %d, attempts %d, next attempt set %v", seq, key, status, attempts, marked)
	}
}
