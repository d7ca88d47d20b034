package wal

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/outbox"
)

// fakeStream hands the reader a fixed list of messages.
type fakeStream struct{ msgs chan pgrepl.Message }

func (f fakeStream) Receive(context.Context) (<-chan pgrepl.Message, <-chan error) {
	return f.msgs, make(chan error)
}
func (fakeStream) Stop()                                        {}
func (fakeStream) SendStatus(context.Context, pgrepl.LSN) error { return nil }
func (fakeStream) Ping(context.Context, pgrepl.LSN) error       { return nil }

func envelope(t *testing.T, keys ...string) []byte {
	t.Helper()
	var events []outbox.Event
	for _, k := range keys {
		events = append(events, outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: "t", AggregateID: k, EventType: "e",
			CreatedAt: time.Now(), Payload: []byte(k)})
	}
	b, err := outbox.AppendWALEnvelope(nil, events)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReaderKeepsStreamOrderAndWholeTransactions: the events of the prefix's transactional
// messages come out in stream order, a transaction only once its commit arrived (then the
// batch confirms its end); other prefixes, and a barrier of another session, are ignored; a
// malformed envelope stops the reader with its position. The batch whose commit reaches the
// session's barrier position says so.
func TestReaderKeepsStreamOrderAndWholeTransactions(t *testing.T) {
	msgs := make(chan pgrepl.Message, 16)
	r := &streamReader{stream: fakeStream{msgs}, prefix: "outboxkit:o", batchSize: 100, maxBytes: 1 << 20, statusInterval: time.Hour}
	r.barrierAt.Store(104)
	msgs <- pgrepl.Begin{FinalLSN: 100}
	msgs <- pgrepl.LogicalMessage{LSN: 10, Transactional: true, Prefix: "outboxkit:o", Content: envelope(t, "a", "b")}
	msgs <- pgrepl.LogicalMessage{LSN: 11, Transactional: true, Prefix: "outboxkit:other", Content: envelope(t, "x")}
	msgs <- pgrepl.LogicalMessage{LSN: 12, Transactional: true, Prefix: "outboxkit:o", Content: envelope(t, "c")}
	msgs <- pgrepl.LogicalMessage{LSN: 13, Prefix: "outboxkit:o", Content: envelope(t, "non-transactional")}
	msgs <- pgrepl.Commit{EndLSN: 101}
	msgs <- pgrepl.Begin{FinalLSN: 103}
	msgs <- pgrepl.Commit{EndLSN: 104}
	out := make(chan batch)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.run(ctx, out) }()
	var keys []string
	var confirm pgrepl.LSN
	barrier := false
	for !barrier {
		b := <-out
		for _, rec := range b.records {
			keys = append(keys, rec.Event.AggregateID)
			if rec.CommitLSN != 100 || rec.Partition != outbox.PartitionOf(rec.KeyHash) {
				t.Fatalf("record %+v: commit %d, partition %d", rec, rec.CommitLSN, rec.Partition)
			}
		}
		confirm = max(confirm, b.confirm)
		barrier = b.barrier
	}
	if got := len(keys); got != 3 || keys[0] != "a" || keys[1] != "b" || keys[2] != "c" || confirm != 104 {
		t.Fatalf("keys %v, confirm %s; want [a b c] and 104", keys, confirm)
	}
	msgs <- pgrepl.Begin{FinalLSN: 200}
	msgs <- pgrepl.LogicalMessage{LSN: 150, Transactional: true, Prefix: "outboxkit:o", Content: []byte{9}}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "0/96") {
		t.Fatalf("a malformed envelope: %v, want an error naming its position 0/96", err)
	}
}

// TestReaderGathersUpToItsBounds: while the delivering loop is busy, the reader gathers whole
// transactions until the batch reaches its bound (WAL.BatchSize), then stops reading; a
// transaction larger than the bound is handed over whole.
func TestReaderGathersUpToItsBounds(t *testing.T) {
	msgs := make(chan pgrepl.Message, 16)
	r := &streamReader{stream: fakeStream{msgs}, prefix: "outboxkit:o", batchSize: 4, maxBytes: 1 << 20, statusInterval: time.Hour}
	tx := func(commit pgrepl.LSN, keys ...string) {
		msgs <- pgrepl.Begin{FinalLSN: commit}
		msgs <- pgrepl.LogicalMessage{LSN: commit - 1, Transactional: true, Prefix: "outboxkit:o", Content: envelope(t, keys...)}
		msgs <- pgrepl.Commit{EndLSN: commit + 1}
	}
	tx(100, "a", "b")
	tx(200, "c", "d")
	tx(300, "e", "f", "g", "h", "i", "j")
	out := make(chan batch)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.run(ctx, out) }()
	// The first two transactions fill the batch: the reader stops before the third one's Begin.
	for deadline := time.Now().Add(10 * time.Second); len(msgs) > 3; {
		if time.Now().After(deadline) {
			t.Fatalf("the reader read only %d messages of 9", 9-len(msgs))
		}
		time.Sleep(time.Millisecond)
	}
	if b := <-out; len(b.records) != 4 || b.confirm != 201 {
		t.Fatalf("first batch: %d records, confirm %s; want 4 (two whole transactions) and 0/C9", len(b.records), b.confirm)
	}
	if b := <-out; len(b.records) != 6 || b.confirm != 301 {
		t.Fatalf("second batch: %d records, confirm %s; want the 6 of the third transaction whole and 0/12D", len(b.records), b.confirm)
	}
}
