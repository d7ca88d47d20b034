package forwarder_test

import (
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// parkedFixture is an outbox with two dead keys failing alike, one retrying key and healthy
// keys, set up as the relay leaves them (status, attempts, next attempt, last error). The
// Admin's tests (forwarder/admin) list and act on the same rows.
type parkedFixture struct {
	h *harness
	// dead and dead2 fail with the same cause (their errors differ in numbers and ids only).
	dead, dead2, retry []outbox.Event
}

const (
	tooLarge1 = "kafka: message 1234 of event 0190a5c4-7c1e-7d3a-9a53-3c8e2d3f1b2a is too large (5000123 bytes, max 1048576)"
	tooLarge2 = "kafka: message 77 of event 0190a5c4-0000-7d3a-9a53-3c8e2d3f1b2b is too large (6000999 bytes, max 1048576)"
	refused   = "dial tcp 10.0.0.7:9092: connect: connection refused"
)

func newParkedFixture(t *testing.T, dialect outbox.Dialect) *parkedFixture {
	t.Helper()
	h := newHarness(t, dialect, nil)
	f := &parkedFixture{h: h,
		dead:  []outbox.Event{h.event("dead", 0), h.event("dead", 1), h.event("dead", 2)},
		dead2: []outbox.Event{h.event("dead2", 0)},
		retry: []outbox.Event{h.event("retry", 0), h.event("retry", 1)},
	}
	f.dead[0].Headers["x-trace"] = "abc"
	h.write(append(append(append([]outbox.Event{h.event("ok", 0)}, f.dead...), f.dead2...), f.retry...)...)
	f.setRow(f.dead[0], 2, 5, time.Now().Add(-time.Minute), tooLarge1)
	f.setRow(f.dead2[0], 2, 1, time.Now(), tooLarge2)
	f.setRow(f.retry[0], 0, 3, time.Now().Add(time.Hour), refused)
	return f
}

// setRow records failures of an event as the relay does.
func (f *parkedFixture) setRow(e outbox.Event, status, attempts int, next time.Time, reason string) {
	f.h.t.Helper()
	_, err := f.h.db.Exec(f.h.dialect.Rebind("UPDATE "+f.h.writer.Table().Events()+
		" SET status = ?, attempts = ?, next_attempt_at = ?, last_error = ? WHERE event_id = ?"),
		status, attempts, f.h.dialect.TimeArg(next), reason, e.ID.String())
	if err != nil {
		f.h.t.Fatal(err)
	}
}

var adminDialects = []outbox.Dialect{outbox.Postgres, outbox.MySQL, outbox.SQLite}
