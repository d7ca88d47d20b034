package forwardertest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// The errors Parked's failing heads carry: the two too-large errors differ in numbers and ids
// only (one failure group), the refused one is another cause.
const (
	TooLarge1 = "kafka: message 1234 of event 0190a5c4-7c1e-7d3a-9a53-3c8e2d3f1b2a is too large (5000123 bytes, max 1048576)"
	TooLarge2 = "kafka: message 77 of event 0190a5c4-0000-7d3a-9a53-3c8e2d3f1b2b is too large (6000999 bytes, max 1048576)"
	Refused   = "dial tcp 10.0.0.7:9092: connect: connection refused"
)

// Parked is an outbox with two dead keys failing alike, one retrying key and a healthy key, set
// up as the relay leaves them (status, attempts, next attempt, last error): the rows the
// forwarder's blocked-keys gauges count and the Admin lists and acts on.
type Parked struct {
	// Dead and Dead2 are dead (status 2) with TooLarge1 and TooLarge2 on their heads; the head
	// of Dead has the header x-trace: abc.
	Dead, Dead2 []outbox.Event
	// Retry waits for its next attempt an hour ahead after 3 attempts refused.
	Retry []outbox.Event
}

// WriteParked writes Parked's events and a healthy key's event to topic through w in one
// transaction of db, then records the failures on the heads.
func WriteParked(t testing.TB, db *sql.DB, dialect outbox.Dialect, w *outbox.Writer, topic string) Parked {
	t.Helper()
	p := Parked{
		Dead:  []outbox.Event{Event(t, topic, "dead", 0), Event(t, topic, "dead", 1), Event(t, topic, "dead", 2)},
		Dead2: []outbox.Event{Event(t, topic, "dead2", 0)},
		Retry: []outbox.Event{Event(t, topic, "retry", 0), Event(t, topic, "retry", 1)},
	}
	p.Dead[0].Headers["x-trace"] = "abc"
	all := append(append(append([]outbox.Event{Event(t, topic, "ok", 0)}, p.Dead...), p.Dead2...), p.Retry...)
	if err := testsupport.WriteEvents(context.Background(), db, w, all...); err != nil {
		t.Fatal(err)
	}
	table := w.Table().Events()
	SetRow(t, db, dialect, table, p.Dead[0], 2, 5, time.Now().Add(-time.Minute), TooLarge1)
	SetRow(t, db, dialect, table, p.Dead2[0], 2, 1, time.Now(), TooLarge2)
	SetRow(t, db, dialect, table, p.Retry[0], 0, 3, time.Now().Add(time.Hour), Refused)
	return p
}

// SetRow records failures of event e in the events table as the relay does.
func SetRow(t testing.TB, db *sql.DB, dialect outbox.Dialect, table string, e outbox.Event, status, attempts int, next time.Time, reason string) {
	t.Helper()
	_, err := db.Exec(dialect.Rebind("UPDATE "+table+
		" SET status = ?, attempts = ?, next_attempt_at = ?, last_error = ? WHERE event_id = ?"),
		status, attempts, dialect.TimeArg(next), reason, e.ID.String())
	if err != nil {
		t.Fatal(err)
	}
}
