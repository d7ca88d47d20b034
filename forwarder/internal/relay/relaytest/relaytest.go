// Package relaytest holds the relay store calls that the forwarder's store tests and the cdc
// source's tests repeat: writing sized events of a key, a relay's heartbeat and its live
// leases. It imports relay, so relay's own tests cannot use it.
package relaytest

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/lease"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// Write commits, through w in one transaction of db, one event of key (topic t, aggregate type
// order) per size, with a payload of that many bytes, and returns the key's partition.
func Write(t testing.TB, ctx context.Context, db *sql.DB, w *outbox.Writer, key string, sizes ...int) int {
	t.Helper()
	var events []outbox.Event
	for _, n := range sizes {
		events = append(events, outbox.Event{Topic: "t", AggregateType: "order", AggregateID: key,
			EventType: "Happened", Payload: []byte(strings.Repeat("x", n))})
	}
	if err := testsupport.WriteEvents(ctx, db, w, events...); err != nil {
		t.Fatal(err)
	}
	return outbox.PartitionOf(outbox.KeyHash("", "order", key))
}

// Heartbeat beats for owner with lease ttl (one lease per partition) and returns the number of
// partitions it owns.
func Heartbeat(t testing.TB, ctx context.Context, db *sql.DB, store *relay.Store, owner string, ttl time.Duration) int {
	t.Helper()
	n, err := store.Heartbeat(ctx, db, owner, ttl, lease.PerPartition{}, nil)
	if err != nil {
		t.Fatalf("heartbeat of %s: %v", owner, err)
	}
	return n
}

// Leases returns owner's live leases (worker 0 of 1).
func Leases(t testing.TB, ctx context.Context, db *sql.DB, store *relay.Store, owner string) []relay.Lease {
	t.Helper()
	l, err := store.LiveLeases(ctx, db, owner, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
