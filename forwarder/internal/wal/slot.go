package wal

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/forwarder/internal/walslot"
)

// DefaultSlotName is the slot of a table's wal source in a lease group: "outboxkit_wal_" and the
// table name in lower case with "." as "_" ("outboxkit_wal_app_orders_outbox"), with a hash
// of the group unless it is "default", and shortened with a hash of the whole to fit 63 bytes.
func DefaultSlotName(table, group string) string {
	name := "outboxkit_wal_" + strings.ReplaceAll(strings.ToLower(table), ".", "_")
	if group != "default" {
		name += "_" + shortHash(group)
	}
	if len(name) > 63 {
		name = name[:54] + "_" + shortHash(name)
	}
	return name
}

func shortHash(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())
}

// acquireSlot makes sure of the slot before the session streams it: the empty publication
// pgoutput needs (first: pgoutput looks it up as of the WAL it decodes, so it must be older than
// the slot), then the slot check of internal/walslot (on the first start it creates and
// registers the slot; a registered slot that is gone or invalidated is an error naming it, and
// the relay does not start). It is the one place that decides what a missing or invalidated slot
// means for the source.
func (s *Source) acquireSlot(ctx context.Context) error {
	if err := pgrepl.CreateEmptyPublication(ctx, s.core.DB, s.cfg.Publication); err != nil {
		return err
	}
	created, err := walslot.Start(ctx, s.core.DB, s.core.Store.Table, s.cfg.Slot)
	if err != nil {
		return err
	}
	if created {
		s.core.Log.Warn("wal: created and registered the replication slot (first start)", "slot", s.cfg.Slot)
	}
	return nil
}
