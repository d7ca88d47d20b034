package forwarder_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestWALAdminShowsPositionLagAndParkedKeys: admin.WAL on a streaming wal relay reports the slot
// usable and streamed (its walsender's PID), the server's position, the slot's confirmed one with
// the WAL between them, the position the relay reported as published, and the parked key with its
// rows in the table; once the key is un-parked, no parked key is left.
func TestWALAdminShowsPositionLagAndParkedKeys(t *testing.T) {
	h := newWALHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	pub := &faultyPublisher{Publisher: h.publisher(), topic: h.topic, poisoned: map[string]error{}}
	h.start(h.walConfig(pub))
	slot := forwarder.WALSlotName(h.writer.Table().Events(), "default")
	h.waitForWALStream(slot)
	adm, err := admin.New(h.db, outbox.Postgres, h.writer.Table().Events())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	var events []outbox.Event
	for n := range 3 {
		events = append(events, h.event("p", n), h.event("o", n))
	}
	pub.poison(events[2].ID.String(), errors.New("broker refuses this one")) // p's n=1
	h.write(events...)
	var written pglogrepl.LSN
	if err := h.db.QueryRow("SELECT pg_current_wal_lsn()::text").Scan(lsnScanner{&written}); err != nil {
		t.Fatal(err)
	}
	var st admin.WALStatus
	waitFor(t, time.Minute, "p parked with two rows and the relay past the writes", func() bool {
		if st, err = adm.WAL(ctx, slot, 10); err != nil {
			t.Fatal(err)
		}
		return st.ParkedKeys == 1 && len(st.Parked) == 1 && st.Parked[0].Rows == 2 &&
			st.RelayLSN != "" && parseLSN(t, st.RelayLSN) >= written && parseLSN(t, st.ConfirmedLSN) >= written
	})
	if !st.Usable() || st.Lost() || !st.Active || st.ActivePID == 0 || st.WALStatus == "" {
		t.Errorf("slot state %+v, want registered, usable and streamed by a walsender", st.WALSlotState)
	}
	if k := st.Parked[0]; k.Key != (admin.Key{AggregateType: "order", AggregateID: "p"}) || k.Dead != 0 || k.Oldest.IsZero() {
		t.Errorf("parked key %+v, want order/p with 2 rows, none dead", k)
	}
	server, confirmed := parseLSN(t, st.ServerLSN), parseLSN(t, st.ConfirmedLSN)
	if confirmed > server || st.LagBytes < 0 {
		t.Errorf("server at %s, confirmed %s, lag %d bytes", st.ServerLSN, st.ConfirmedLSN, st.LagBytes)
	}
	if st.SentLSN == "" || parseLSN(t, st.SentLSN) < parseLSN(t, st.RelayLSN) || st.RelayReportedAt.IsZero() {
		t.Errorf("sent %q, relay published %q at %v: the server sends before the relay reports", st.SentLSN, st.RelayLSN, st.RelayReportedAt)
	}
	t.Logf("server %s, confirmed %s (lag %d B), relay published %s, sent %s, parked %+v",
		st.ServerLSN, st.ConfirmedLSN, st.LagBytes, st.RelayLSN, st.SentLSN, st.Parked)

	pub.mu.Lock()
	clear(pub.poisoned)
	pub.mu.Unlock()
	waitFor(t, time.Minute, "p un-parked", func() bool {
		if st, err = adm.WAL(ctx, slot, 10); err != nil {
			t.Fatal(err)
		}
		return st.ParkedKeys == 0 && len(st.Parked) == 0
	})
	if _, err := adm.WAL(ctx, slot, 0); err == nil {
		t.Error("admin.WAL with limit 0: no error")
	}
}

// lsnScanner scans a pg_lsn's text into an LSN.
type lsnScanner struct{ lsn *pglogrepl.LSN }

func (s lsnScanner) Scan(src any) error {
	text, ok := src.(string)
	if !ok {
		return errors.New("pg_lsn: not text")
	}
	lsn, err := pglogrepl.ParseLSN(text)
	*s.lsn = lsn
	return err
}

func parseLSN(t *testing.T, text string) pglogrepl.LSN {
	t.Helper()
	lsn, err := pglogrepl.ParseLSN(text)
	if err != nil {
		t.Fatalf("position %q: %v", text, err)
	}
	return lsn
}
