package main

import (
	"context"
	"database/sql"
	"errors"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// The wal relay (-source wal): the outboxkit forwarder with Source wal, draining a backlog that
// outbox.Writer wrote in ModeWAL (logical decoding messages, no row) into a slot made and
// registered before it, as for a relay that was down while the backlog built up. -source wal
// also measures the wal ceiling (walceiling.go) on the same kind of backlog and the forwarder
// with Delivery exactly_once on the wal source, once the forwarder has it.

// relayWAL is the outboxkit forwarder with Source wal; relayWALExactlyOnce the same with
// Delivery exactly_once.
const (
	relayWAL            = "outboxkit-wal"
	relayWALExactlyOnce = "outboxkit-wal-eo"
)

// notBuilt is the reason printed for a relay whose forwarder feature does not exist yet.
const notBuilt = "not built"

// isWAL reports whether relay streams logical decoding messages (the wal source's backlog and
// slot).
func isWAL(relay string) bool {
	relay, _ = baseOf(relay)
	return relay == relayWAL || relay == relayWALExactlyOnce || relay == relayWALCeiling
}

// walExactlyOnceBuilt reports whether this build's forwarder accepts Delivery exactly_once with
// Source wal: its configuration check is asked whether it refuses the combination as
// unsupported (forwarder.ErrUnsupported); nothing connects.
func walExactlyOnceBuilt() bool {
	return !errors.Is(walProbeConfig(forwarder.ExactlyOnce).Validate(), forwarder.ErrUnsupported)
}

// walProbeConfig is a wal relay configuration with delivery for walExactlyOnceBuilt.
func walProbeConfig(delivery forwarder.Delivery) forwarder.Config {
	cfg := forwarder.Config{Dialect: outbox.Postgres, Table: "relaybench_probe", DB: &sql.DB{}, Publisher: noPublisher{},
		Delivery: delivery, CheckpointTopic: "relaybench.checkpoints"}
	walForwarderConfig(&cfg, database{dsn: "postgres://probe@localhost/probe"}, cfg.Table)
	return cfg
}

// noPublisher is the publisher of walExactlyOnceBuilt's configuration, never used.
type noPublisher struct{}

func (noPublisher) Publish(string, ...*message.Message) error { return nil }
func (noPublisher) Close() error                              { return nil }

// walForwarderConfig sets cfg to stream the slot of the wal backlog name (walSetup).
func walForwarderConfig(cfg *forwarder.Config, d database, name string) {
	cfg.Source, cfg.WAL.DSN, cfg.WAL.Slot = forwarder.SourceWAL, d.dsn, walCeilingSlot(name)
}

// walSetup prepares the wal backlog of relay (outboxkit-wal, outboxkit-wal-eo, wal-ceiling):
// refused as not built for the exactly-once relay when the forwarder lacks it.
func walSetup(ctx context.Context, db *sql.DB, d database, relay, name string) (writeFunc, error) {
	if b, _ := baseOf(relay); b == relayWALExactlyOnce && !walExactlyOnceBuilt() {
		return nil, &notAvailableError{reason: notBuilt}
	}
	return walCeilingSetup(ctx, db, d, name)
}
