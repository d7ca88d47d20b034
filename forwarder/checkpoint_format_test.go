package forwarder

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// The checkpoint a unit writes beside its events (bookkeeping's format), as the store tests
// build it.
type (
	checkpoint = bookkeeping.Checkpoint
	rowRef     = bookkeeping.RowRef
	deadRow    = bookkeeping.DeadRow
)

// fakeTxPublisher is a TransactionalPublisher that never runs a transaction: for tests of the
// forwarder's own bookkeeping. It counts the units' open sessions.
type fakeTxPublisher struct {
	fakeOutcomePublisher
	sessions sync.Map // unit name → struct{}, while open
}

func (p *fakeTxPublisher) OpenUnit(_ context.Context, unit, _ string, _ int) ([]byte, error) {
	p.sessions.Store(unit, struct{}{})
	return nil, nil
}
func (p *fakeTxPublisher) CommitUnit(_ context.Context, unit string, _ []string, _ []*message.Message, _ []byte) ([]error, error) {
	p.sessions.Delete(unit) // a failed commit closes the session
	return nil, errors.New("no transactions here")
}
func (p *fakeTxPublisher) CloseUnit(unit string) { p.sessions.Delete(unit) }

// open reports whether unit has an open session.
func (p *fakeTxPublisher) open(unit string) bool {
	_, ok := p.sessions.Load(unit)
	return ok
}

func TestParseCleanupMark(t *testing.T) {
	for _, c := range []struct {
		mark    string
		digest  string
		settled uint64
	}{
		{"", "", 0},
		{"abc", "abc", 0},
		{relay.UnitMark{Digest: "abc", Settled: 1<<0 | 1<<62}.CleanupMark(), "abc", 1<<0 | 1<<62},
		{"abc/zz", "", 0},
		{"abc/0000000000000000", "", 0},
	} {
		if d, s := relay.ParseCleanupMark(c.mark); d != c.digest || s != c.settled {
			t.Errorf("parseCleanupMark(%q) = %q, %x; want %q, %x", c.mark, d, s, c.digest, c.settled)
		}
	}
	if m := (relay.UnitMark{Digest: "0123456789abcdef0123456789abcdef", Settled: ^uint64(0)}).CleanupMark(); len(m) > 64 {
		t.Errorf("a cleanup mark of %d characters does not fit MySQL's VARCHAR(64): %s", len(m), m)
	}
}
