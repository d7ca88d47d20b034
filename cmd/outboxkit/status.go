package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/admin"
)

// adminTimeout bounds every admin command's database work.
const adminTimeout = 30 * time.Second

// openAdmin loads the configuration (without the broker part), opens and pings the database
// and returns its Admin. The caller closes the database.
func (a *app) openAdmin(ctx context.Context) (*admin.Admin, *sql.DB, error) {
	cfg, err := a.loadConfig(false)
	if err != nil {
		return nil, nil, err
	}
	return openAdminFor(ctx, cfg)
}

func openAdminFor(ctx context.Context, cfg relayconfig.Config) (*admin.Admin, *sql.DB, error) {
	db, err := openDB(cfg.Database)
	if err != nil {
		return nil, nil, err
	}
	if err := pingDB(ctx, db, cfg.Database, 10*time.Second); err != nil {
		db.Close()
		return nil, nil, err
	}
	adm, err := admin.New(db, cfg.Database.Dialect, cfg.Database.Table)
	if err != nil {
		db.Close()
		return nil, nil, usageErr(err)
	}
	return adm, db, nil
}

// topicStatusJSON is one row of `status --json`.
type topicStatusJSON struct {
	Topic                   string     `json:"topic"`
	Pending                 int64      `json:"pending"`
	Retrying                int64      `json:"retrying"`
	Dead                    int64      `json:"dead"`
	Skipped                 int64      `json:"skipped"`
	OldestPending           *time.Time `json:"oldest_pending"`
	OldestPendingAgeSeconds *float64   `json:"oldest_pending_age_seconds"`
}

func (a *app) statusCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the outbox backlog per topic: pending, retrying, dead, age of the oldest pending event",
		Long: `status prints one line per topic that has events in the outbox table:

  TOPIC       the destination topic
  PENDING     events waiting to be published, including those waiting for a retry
  RETRYING    the part of PENDING that failed at least once
  DEAD        dead-lettered events waiting for an operator (see dead-letters)
  SKIPPED     heads of keys an operator skipped (keys skip): kept until replayed or discarded
  OLDEST      age of the oldest pending event ("-" when none)

Published rows kept for forwarder.retention are not counted, nor are scheduled events (not due
yet): a line "scheduled: N, next due <time> UTC (in <duration>)" follows the table (see
'outboxkit scheduled list').

On PostgreSQL, a line per replication slot of the cdc source follows (the slot of the
configured lease group is listed as MISSING when forwarder.source is cdc and it does not
exist): whether a relay streams it, its wal_status ("lost": invalidated by
max_slot_wal_keep_size), the WAL it pins (LAG) and whether the table was drained into it.

With forwarder.source wal, the wal source's section follows: its slot (streaming or idle, usable
or lost), the server's position, the slot's confirmed one and the WAL between them (lag), the
position the streaming relay last reported as published, and the parked keys (keys whose events
wait in the table) with their rows, the oldest 20.

With forwarder.delivery exactly_once, the transactional units follow (read from the broker):
each unit's owner and its last committed checkpoint (transaction, relay, time, rows).
--json prints the topics only (outboxkit cdc slots --json prints the slots).`,
		Example: `  outboxkit status --config outboxkit.yaml
  outboxkit status --config outboxkit.yaml --json | jq '.[] | select(.dead > 0)'`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), adminTimeout)
			defer cancel()
			return a.status(ctx, asJSON)
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false,
		"print a JSON array of {topic, pending, retrying, dead, skipped, oldest_pending, oldest_pending_age_seconds} instead of a table")
	return cmd
}

// status prints the backlog per topic, as JSON with asJSON; otherwise as a table followed by the
// blocked keys, the cdc slots and, with exactly-once delivery, the transactional units.
func (a *app) status(ctx context.Context, asJSON bool) error {
	cfg, exactlyOnce, err := a.statusConfig(asJSON)
	if err != nil {
		return err
	}
	adm, db, err := openAdminFor(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	topics, err := adm.Status(ctx)
	if err != nil {
		return withMigrateHint(fmt.Errorf("status: %w", err))
	}
	slots, err := adm.Slots(ctx, streamedGroups(cfg)...)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	now := time.Now()
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(topicsJSON(topics, now))
	}
	if len(topics) == 0 {
		fmt.Fprintln(a.stdout, "the outbox is empty: nothing pending, nothing dead")
	} else {
		if err := printTopics(a.stdout, topics, now); err != nil {
			return err
		}
		if err := printBlocked(ctx, a.stdout, adm, now); err != nil {
			return err
		}
	}
	sum, err := adm.ScheduledSummary(ctx)
	if err != nil {
		return withMigrateHint(fmt.Errorf("status: %w", err))
	}
	fmt.Fprintln(a.stdout, scheduledLine(sum, now))
	if err := printSlots(a.stdout, slots); err != nil {
		return err
	}
	if slot := walSlotOf(cfg); slot != "" {
		st, err := adm.WAL(ctx, slot, walParkedShown)
		if err != nil {
			return withMigrateHint(fmt.Errorf("status: %w", err))
		}
		if err := printWAL(a.stdout, st, now); err != nil {
			return err
		}
	}
	if exactlyOnce {
		return a.printUnits(ctx, adm, cfg)
	}
	return nil
}

// statusConfig loads the configuration and tells whether the delivery is exactly-once; then,
// unless asJSON (which prints the topics only), it loads the broker part too, from which the
// transactional units are read.
func (a *app) statusConfig(asJSON bool) (relayconfig.Config, bool, error) {
	cfg, err := a.loadConfig(false)
	if err != nil {
		return relayconfig.Config{}, false, err
	}
	exactlyOnce := forwarder.Delivery(cfg.Forwarder.Delivery) == forwarder.ExactlyOnce
	if exactlyOnce && !asJSON {
		if cfg, err = a.loadConfig(true); err != nil {
			return relayconfig.Config{}, false, err
		}
	}
	return cfg, exactlyOnce, nil
}

// topicsJSON returns the rows of `status --json`; the ages are taken at now.
func topicsJSON(topics []admin.TopicStatus, now time.Time) []topicStatusJSON {
	out := make([]topicStatusJSON, 0, len(topics))
	for _, t := range topics {
		row := topicStatusJSON{Topic: t.Topic, Pending: t.Pending, Retrying: t.Retrying, Dead: t.Dead, Skipped: t.Skipped}
		if !t.OldestPending.IsZero() {
			oldest := t.OldestPending.UTC()
			age := now.Sub(oldest).Seconds()
			row.OldestPending, row.OldestPendingAgeSeconds = &oldest, &age
		}
		out = append(out, row)
	}
	return out
}

// printTopics prints the status table, a line per topic; the ages are taken at now.
func printTopics(w io.Writer, topics []admin.TopicStatus, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPENDING\tRETRYING\tDEAD\tSKIPPED\tOLDEST")
	for _, t := range topics {
		age := "-"
		if !t.OldestPending.IsZero() {
			age = formatAge(now.Sub(t.OldestPending))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", t.Topic, t.Pending, t.Retrying, t.Dead, t.Skipped, age)
	}
	return tw.Flush()
}

// formatAge prints a duration rounded for humans: 850ms, 42s, 3m20s, 5h2m0s.
func formatAge(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	default:
		return d.Round(time.Minute).String()
	}
}
