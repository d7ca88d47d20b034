package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/admin"
)

// printUnits prints the delivery mode and a line per transactional unit of exactly-once
// delivery: its owner and its last checkpoint, read from the broker.
func (a *app) printUnits(ctx context.Context, adm *admin.Admin, cfg relayconfig.Config) error {
	brokers, err := brokerconfig.Build(ctx, cfg.Broker, watermill.NopLogger{})
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	defer brokers.Close()
	reader, ok := brokers.Publisher().(admin.CheckpointReader)
	if !ok {
		return fmt.Errorf("status: broker %s cannot read exactly-once checkpoints", brokers.Broker())
	}
	f := cfg.Forwarder
	group := f.LeaseGroup
	if group == "" {
		group = forwarder.DefaultLeaseGroup(f.Tenants)
	}
	units, err := adm.Units(ctx, reader, admin.UnitsQuery{LeaseGroup: group,
		TransactionalIDPrefix: f.TransactionalIDPrefix, CheckpointTopic: f.CheckpointTopic})
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	topic := f.CheckpointTopic
	if topic == "" {
		topic = forwarder.DefaultCheckpointTopic
	}
	fmt.Fprintf(a.stdout, "\ndelivery: exactly_once (checkpoints in topic %s)\n", topic)
	for _, u := range units {
		if u.CheckpointError != "" {
			fmt.Fprintf(a.stdout, "UNREADABLE CHECKPOINT: unit %s: %s; the relays refuse the unit and its events wait\n",
				u.Unit, u.CheckpointError)
		}
		if u.Checkpoint != nil && u.Checkpoint.Foreign {
			fmt.Fprintf(a.stdout, "FOREIGN CHECKPOINT: unit %s: its last checkpoint belongs to installation %s, not this one; "+
				"the relays refuse it and the unit's events wait: give the installations different transactional_id_prefix values\n",
				u.Unit, u.Checkpoint.Installation)
		}
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "UNIT\tOWNER\tLAST TXN\tBY RELAY\tAT\tROWS (PUBLISHED/DEAD)")
	for _, u := range units {
		owner := u.Owner
		if owner == "" {
			owner = "-"
		}
		if u.Checkpoint == nil {
			last := "-"
			if u.CheckpointError != "" {
				last = "unreadable"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\n", u.Unit, owner, last)
			continue
		}
		c := u.Checkpoint
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s ago\t%d/%d\n", u.Unit, owner, c.Txn, c.Relay,
			formatAge(time.Since(c.Time)), c.Published, c.Dead)
	}
	return tw.Flush()
}
