package exactlyonce

import (
	"context"
	"errors"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// fakeTx is a transactional publisher in memory: a unit's session is open from OpenUnit until
// CloseUnit or a failed CommitUnit; a commit takes every message unless refuse fails one, which
// aborts the transaction (failing the key's later messages in it too: gapless per key). It
// keeps each unit's last committed checkpoint and what each commit held.
type fakeTx struct {
	mu sync.Mutex
	// refuse returns the error of a message on topic, nil to take it.
	refuse  func(topic string, msg *message.Message) error
	open    map[string]bool
	opens   int
	last    map[string][]byte
	commits []fakeCommit
}

// fakeCommit is one committed transaction.
type fakeCommit struct {
	unit       string
	topics     []string
	msgs       []*message.Message
	checkpoint []byte
}

var errAborted = errors.New("transaction aborted")

func (*fakeTx) Publish(string, ...*message.Message) error {
	return errors.New("fakeTx: Publish outside a transaction")
}
func (*fakeTx) Close() error { return nil }

func (p *fakeTx) OpenUnit(_ context.Context, unit, _ string, _ int) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open == nil {
		p.open = map[string]bool{}
	}
	p.open[unit] = true
	p.opens++
	return p.last[unit], nil
}

func (p *fakeTx) CommitUnit(_ context.Context, unit string, topics []string, msgs []*message.Message, checkpoint []byte) ([]error, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := make([]error, len(msgs))
	if !p.open[unit] {
		return errs, errors.New("fakeTx: the unit's session is not open (fenced)")
	}
	failed := false
	broken := map[string]bool{}
	for i, m := range msgs {
		key := topics[i] + "/" + m.Metadata.Get(outbox.MetadataAggregateID)
		switch {
		case broken[key]:
			errs[i] = errAborted
		case p.refuse != nil:
			if errs[i] = p.refuse(topics[i], m); errs[i] != nil {
				broken[key], failed = true, true
			}
		}
	}
	if failed {
		delete(p.open, unit)
		return errs, errAborted
	}
	if p.last == nil {
		p.last = map[string][]byte{}
	}
	p.last[unit] = checkpoint
	p.commits = append(p.commits, fakeCommit{unit: unit, topics: topics, msgs: msgs, checkpoint: checkpoint})
	return errs, nil
}

func (p *fakeTx) CloseUnit(unit string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.open, unit)
}

// openSessions is the number of units with an open session.
func (p *fakeTx) openSessions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.open)
}

// fakeAcker acknowledges everything it is handed, as a relay that owns every partition, and
// records it.
type fakeAcker struct {
	mu      sync.Mutex
	acked   []relay.Record
	settled []relay.Settlement
	marks   []relay.UnitMark
	calls   int
}

func (a *fakeAcker) AcknowledgeMarked(_ context.Context, _ int, _ []relay.Lease, acked []relay.Record, settled []relay.Settlement,
	marks []relay.UnitMark, _ int) (relay.Outcome, map[int]int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	a.acked = append(a.acked, acked...)
	a.settled = append(a.settled, settled...)
	a.marks = append(a.marks, marks...)
	return relay.Outcome{Acked: acked, Settled: settled}, map[int]int{}, nil
}
