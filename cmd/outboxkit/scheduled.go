package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/outbox"
)

func (a *app) scheduledCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scheduled",
		Short: "List or cancel scheduled events (events with a delivery time not released yet)",
		Long: `A scheduled event (outbox.Event.DeliverAt, Watermill's components/delay, or the deliver_at column)
waits in the outbox table until its time; the relay then releases it and publishes it like any
event (docs/scheduled.md). Until then it can be cancelled: 'scheduled cancel' does what
outbox.Writer.Cancel does, in a transaction of its own.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.scheduledListCommand(), a.scheduledCancelCommand())
	return cmd
}

// scheduledJSON is one element of `scheduled list --json`.
type scheduledJSON struct {
	EventID       string    `json:"event_id"`
	Seq           int64     `json:"seq"`
	Topic         string    `json:"topic"`
	AggregateType string    `json:"aggregate_type"`
	AggregateID   string    `json:"aggregate_id"`
	EventType     string    `json:"event_type"`
	TenantID      string    `json:"tenant_id"`
	CreatedAt     time.Time `json:"created_at"`
	DeliverAt     time.Time `json:"deliver_at"`
}

func (a *app) scheduledListCommand() *cobra.Command {
	var (
		limit  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the scheduled events, next due first",
		Long: `list prints how many events are scheduled and when the next is due, then the scheduled events,
next due first: event id, topic, aggregate (type/id), event type, tenant and delivery time (UTC).
Events the relay has released (due, being published) are not listed: they are pending.`,
		Example: `  outboxkit scheduled list --config outboxkit.yaml --limit 20
  outboxkit scheduled list --config outboxkit.yaml --json | jq -r '.[].event_id'`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			if limit <= 0 {
				return usageErr(fmt.Errorf("--limit: must be positive, got %d", limit))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), adminTimeout)
			defer cancel()
			adm, db, err := a.openAdmin(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			events, err := adm.ScheduledEvents(ctx, limit)
			if err != nil {
				return withMigrateHint(fmt.Errorf("scheduled list: %w", err))
			}
			if asJSON {
				return printScheduledJSON(a.stdout, events)
			}
			sum, err := adm.ScheduledSummary(ctx)
			if err != nil {
				return fmt.Errorf("scheduled list: %w", err)
			}
			return printScheduled(a.stdout, sum, events, time.Now())
		}),
	}
	cmd.Flags().IntVar(&limit, "limit", 100, "list at most this many events")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of the events instead of a table")
	return cmd
}

// printScheduledJSON prints the events as `scheduled list --json`.
func printScheduledJSON(w io.Writer, events []admin.ScheduledEvent) error {
	out := make([]scheduledJSON, 0, len(events))
	for _, e := range events {
		out = append(out, scheduledJSON{EventID: e.EventID.String(), Seq: e.Seq, Topic: e.Topic, AggregateType: e.AggregateType,
			AggregateID: e.AggregateID, EventType: e.EventType, TenantID: e.TenantID, CreatedAt: e.CreatedAt.UTC(), DeliverAt: e.DeliverAt.UTC()})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// printScheduled prints the summary line and the events as a table; the times to come are taken
// at now.
func printScheduled(w io.Writer, sum admin.ScheduledSummary, events []admin.ScheduledEvent, now time.Time) error {
	fmt.Fprintln(w, scheduledLine(sum, now))
	if len(events) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EVENT ID\tTOPIC\tAGGREGATE\tEVENT TYPE\tTENANT\tDELIVER AT (UTC)\tIN")
	for _, e := range events {
		fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\t%s\t%s\t%s\n", e.EventID, e.Topic, e.AggregateType, e.AggregateID, e.EventType,
			e.TenantID, e.DeliverAt.UTC().Format("2006-01-02 15:04:05.000"), formatAge(e.DeliverAt.Sub(now)))
	}
	return tw.Flush()
}

// scheduledLine is the one-line summary `status` and `scheduled list` print.
func scheduledLine(sum admin.ScheduledSummary, now time.Time) string {
	if sum.Count == 0 {
		return "scheduled: none"
	}
	return fmt.Sprintf("scheduled: %d, next due %s UTC (in %s)", sum.Count, sum.NextDue.UTC().Format("2006-01-02 15:04:05"),
		formatAge(sum.NextDue.Sub(now)))
}

// scheduleResultJSON is the output of `scheduled cancel --json`.
type scheduleResultJSON struct {
	Cancelled []string `json:"cancelled"`
	Released  []string `json:"released"`
	NotFound  []string `json:"not_found"`
}

func (a *app) scheduledCancelCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "cancel EVENT_ID...",
		Short: "Cancel scheduled events by id, saying for each whether it was cancelled, already released or not found",
		Long: `cancel removes the scheduled events whose ids are given, in one transaction, exactly as
outbox.Writer.Cancel does (docs/scheduled.md), and prints one line per id:

  cancelled   it was still scheduled: it will never be published
  released    the relay had already released it (it came due): it is being published, retried
              or was dead-lettered, and consumers will see it
  not found   no scheduled, pending or dead event has that id: already published, skipped,
              never written, or written by a transaction still open

A cancel racing the relay's release is decided by the row lock: a committed cancel never lets
its event out. Exit status 0 whatever the outcome of each id; a malformed id is refused, by name,
before anything is cancelled.`,
		Example: `  outboxkit scheduled cancel --config outboxkit.yaml 0190a5c4-7c1e-7d3a-9a53-3c8e2d3f1b2a
  outboxkit scheduled list --config outboxkit.yaml --json | jq -r '.[] | select(.aggregate_id == "o-1") | .event_id' |
    xargs outboxkit scheduled cancel --config outboxkit.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: a.runE(func(cmd *cobra.Command, args []string) error {
			ids, err := parseEventIDs(args)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), adminTimeout)
			defer cancel()
			adm, db, err := a.openAdmin(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			res, err := adm.CancelScheduled(ctx, ids...)
			if err != nil {
				return withMigrateHint(fmt.Errorf("scheduled cancel: %w", err))
			}
			return printScheduleResult(a.stdout, ids, res, asJSON)
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {cancelled, released, not_found} (arrays of ids) as JSON")
	return cmd
}

// printScheduleResult prints the outcome of each id, in the order given (or as JSON).
func printScheduleResult(w io.Writer, ids []uuid.UUID, res outbox.ScheduleResult, asJSON bool) error {
	texts := func(ids []uuid.UUID) []string {
		out := make([]string, 0, len(ids))
		for _, id := range ids {
			out = append(out, id.String())
		}
		return out
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(scheduleResultJSON{Cancelled: texts(res.Changed), Released: texts(res.Released), NotFound: texts(res.NotFound)})
	}
	outcome := map[uuid.UUID]string{}
	for _, id := range res.Changed {
		outcome[id] = "cancelled"
	}
	for _, id := range res.Released {
		outcome[id] = "released"
	}
	for _, id := range res.NotFound {
		outcome[id] = "not found"
	}
	for _, id := range ids {
		fmt.Fprintf(w, "%s\t%s\n", id, outcome[id])
	}
	fmt.Fprintf(w, "cancelled %d, released %d, not found %d\n", len(res.Changed), len(res.Released), len(res.NotFound))
	return nil
}
