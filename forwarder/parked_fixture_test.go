package forwarder_test

import (
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport/forwardertest"
	"github.com/outboxkit/outboxkit/outbox"
)

// parkedFixture is an outbox with two dead keys failing alike, one retrying key and healthy
// keys, set up as the relay leaves them (forwardertest.Parked). The Admin's tests
// (forwarder/admin) list and act on the same rows.
type parkedFixture struct {
	h *harness
	forwardertest.Parked
}

func newParkedFixture(t *testing.T, dialect outbox.Dialect) *parkedFixture {
	t.Helper()
	h := newHarness(t, dialect, nil)
	return &parkedFixture{h: h, Parked: forwardertest.WriteParked(t, h.db, h.dialect, h.writer, h.topic)}
}

var adminDialects = []outbox.Dialect{outbox.Postgres, outbox.MySQL, outbox.SQLite}
