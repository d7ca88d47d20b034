package cdc

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// fakeStream is a replication stream the test feeds.
type fakeStream struct {
	msgs     chan pgrepl.Message
	errs     chan error
	mu       sync.Mutex
	statuses []pgrepl.LSN
	stopped  bool
}

func newFakeStream() *fakeStream {
	return &fakeStream{msgs: make(chan pgrepl.Message, 16), errs: make(chan error, 1)}
}

func (s *fakeStream) Receive(context.Context) (<-chan pgrepl.Message, <-chan error) {
	return s.msgs, s.errs
}

func (s *fakeStream) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
}

func (s *fakeStream) SendStatus(_ context.Context, confirmed pgrepl.LSN) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if confirmed != 0 {
		s.statuses = append(s.statuses, confirmed)
	}
	return nil
}

func streamedRow(seq int64, tenant string) pgrepl.Row {
	return pgrepl.Row{Seq: seq, KeyHash: seq * 10, Partition: int(seq) % outbox.Partitions,
		Event: outbox.Event{TenantID: tenant, Payload: []byte("payload")}}
}

// takeUntilConfirm collects the reader's batches until one confirms a position.
func takeUntilConfirm(t *testing.T, out <-chan batch) (records []relay.Record, xids []uint32, last batch) {
	t.Helper()
	timeout := time.After(2 * time.Minute) // a bound against a hang
	for {
		select {
		case b := <-out:
			records, xids = append(records, b.records...), append(xids, b.xids...)
			if b.confirm != 0 {
				return records, xids, b
			}
		case <-timeout:
			t.Fatal("no batch confirmed a position")
		}
	}
}

// The reader batches a transaction's inserts of the relay's tenants with their transaction and
// commit position, confirms its commit, offers an idle keepalive's position, answers a
// keepalive that asks, and ends with the stream's error, stopping the stream.
func TestCDCReaderBatchesTheStream(t *testing.T) {
	s := newFakeStream()
	r := &streamReader{stream: s, batchSize: 100, maxBytes: 1 << 20, statusInterval: time.Hour, tenants: map[string]bool{"a": true}}
	out := make(chan batch)
	done := make(chan error, 1)
	go func() { done <- r.run(context.Background(), out) }()

	s.msgs <- pgrepl.Begin{WALEnd: 90, Xid: 7, FinalLSN: 100}
	s.msgs <- pgrepl.Insert{WALEnd: 90, Row: streamedRow(1, "a")}
	s.msgs <- pgrepl.Insert{WALEnd: 90, Row: streamedRow(2, "b")} // another tenant's
	s.msgs <- pgrepl.Skipped{WALEnd: 95}
	s.msgs <- pgrepl.Insert{WALEnd: 95, Row: streamedRow(3, "a")}
	s.msgs <- pgrepl.Commit{WALEnd: 105, EndLSN: 110, Time: time.Now()}
	records, xids, last := takeUntilConfirm(t, out)
	if len(records) != 2 || records[0].Seq != 1 || records[1].Seq != 3 {
		t.Fatalf("batched %+v, want rows 1 and 3 (tenant a)", records)
	}
	for i, rec := range records {
		if rec.CommitLSN != 100 || xids[i] != 7 || rec.KeyHash != rec.Seq*10 || rec.Event.TenantID != "a" {
			t.Errorf("record %d: %+v, xid %d", i, rec, xids[i])
		}
	}
	if last.confirm != 110 || last.walEnd != 105 {
		t.Errorf("confirm %d, wal end %d; want 110, 105", last.confirm, last.walEnd)
	}

	r.confirmed.Store(110)
	s.msgs <- pgrepl.Keepalive{WALEnd: 200, ReplyRequested: true}
	if _, _, idle := takeUntilConfirm(t, out); idle.confirm != 200 || len(idle.records) != 0 {
		t.Errorf("idle keepalive batch %+v, want confirm 200 and no records", idle)
	}
	s.mu.Lock()
	statuses := append([]pgrepl.LSN(nil), s.statuses...)
	s.mu.Unlock()
	if len(statuses) != 1 || statuses[0] != 110 {
		t.Errorf("statuses sent %v, want [110] (the confirmed position, when asked)", statuses)
	}

	failure := errors.New("stream failed")
	s.errs <- failure
	if err := <-done; !errors.Is(err, failure) {
		t.Fatalf("run returned %v, want the stream's error", err)
	}
	if !s.stopped {
		t.Error("run returned without stopping the stream")
	}
}
