package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/outboxkit/outboxkit/forwarder/admin"
)

// allPageSize is how many dead letters --all handles per round trip.
const allPageSize = 500

func (a *app) deadLettersCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "dead-letters",
		Aliases: []string{"dlq"},
		Short:   "List, replay or discard dead-lettered events",
		Long: `A dead-lettered event failed forwarder.max_attempts times (or failed with an error the broker
reports as permanent). The forwarder published it to forwarder.dead_letter_topic with the reason,
and keeps it in the outbox table with status dead; it holds back the later events of its key
(tenant, aggregate type, aggregate id) until an operator replays or discards it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.deadLettersListCommand(), a.deadLettersShowCommand(), a.deadLettersGroupsCommand(),
		a.deadLettersActionCommand(true), a.deadLettersActionCommand(false))
	return cmd
}

// deadLetterJSON is one element of `dead-letters list --json`.
type deadLetterJSON struct {
	EventID       string    `json:"event_id"`
	Seq           int64     `json:"seq"`
	Topic         string    `json:"topic"`
	AggregateType string    `json:"aggregate_type"`
	AggregateID   string    `json:"aggregate_id"`
	EventType     string    `json:"event_type"`
	TenantID      string    `json:"tenant_id"`
	Attempts      int       `json:"attempts"`
	LastError     string    `json:"last_error"`
	CreatedAt     time.Time `json:"created_at"`
	// State is dead (it holds back its key) or skipped (outboxkit keys skip: it holds back nothing).
	State       string `json:"state"`
	Fingerprint string `json:"fingerprint"`
}

func (a *app) deadLettersListCommand() *cobra.Command {
	var (
		flags  filterFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead-lettered (and skipped) events, oldest first, with filters",
		Long: `list prints the dead-lettered events of the outbox table, oldest first: event id, topic,
aggregate (type/id), event type, tenant, state (dead, or skipped by 'keys skip'), attempts,
creation time, failure group (the fingerprint of the error, see 'dead-letters groups') and the
last error (cut to fit in the table; --json prints it whole). The filters combine.`,
		Example: `  outboxkit dead-letters list --config outboxkit.yaml --limit 20
  outboxkit dead-letters list --config outboxkit.yaml --topic orders --error "too large" --since 2h
  outboxkit dead-letters list --config outboxkit.yaml --json | jq -r '.[].event_id'`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			limit := flags.limit
			if limit <= 0 {
				return usageErr(fmt.Errorf("--limit: must be positive, got %d", limit))
			}
			filter, err := flags.eventFilter(time.Now())
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
			dead, err := adm.FindDeadLetters(ctx, filter)
			if err != nil {
				return withMigrateHint(fmt.Errorf("list dead letters: %w", err))
			}
			if asJSON {
				out := make([]deadLetterJSON, 0, len(dead))
				for _, d := range dead {
					out = append(out, deadLetterJSON{EventID: d.EventID.String(), Seq: d.Seq, Topic: d.Topic,
						AggregateType: d.AggregateType, AggregateID: d.AggregateID, EventType: d.EventType,
						TenantID: d.TenantID, Attempts: d.Attempts, LastError: d.LastError, CreatedAt: d.CreatedAt.UTC(),
						State: d.State, Fingerprint: d.Fingerprint})
				}
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			if len(dead) == 0 {
				fmt.Fprintln(a.stdout, "no dead letters")
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "EVENT ID\tTOPIC\tAGGREGATE\tEVENT TYPE\tTENANT\tSTATE\tATTEMPTS\tCREATED\tGROUP\tLAST ERROR")
			for _, d := range dead {
				tenant := d.TenantID
				if tenant == "" {
					tenant = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", d.EventID, d.Topic, d.AggregateType, d.AggregateID,
					d.EventType, tenant, d.State, d.Attempts, d.CreatedAt.UTC().Format(time.RFC3339), d.Fingerprint, truncate(d.LastError, 80))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(dead) == limit {
				fmt.Fprintf(a.stderr, "(showing the first %d; raise --limit to see more)\n", limit)
			}
			return nil
		}),
	}
	flags.register(cmd.Flags(), true)
	cmd.Flags().IntVar(&flags.limit, "limit", 100, "list at most this many dead letters (oldest first)")
	cmd.Flags().BoolVar(&asJSON, "json", false,
		"print a JSON array of {event_id, seq, topic, aggregate_type, aggregate_id, event_type, tenant_id, attempts, last_error, created_at, state, fingerprint}")
	return cmd
}

// deadLettersActionCommand is `replay` (replay true) or `discard`.
func (a *app) deadLettersActionCommand(replay bool) *cobra.Command {
	var all, yes, dryRun bool
	verb, past := "discard", "discarded"
	short := "Delete dead-lettered events for good, releasing the later events of their keys"
	long := `discard deletes the given dead-lettered events from the outbox table for good; the later
events of their keys then flow again. Ids that are not dead letters (unknown, pending or published)
are ignored and reported. --all discards every dead letter and, because nothing can bring them
back, needs --yes.`
	if replay {
		verb, past = "replay", "replayed"
		short = "Make dead-lettered events pending again, with fresh attempts"
		long = `replay makes the given dead-lettered events pending again with fresh attempts; a running relay
publishes them, then the later events of their keys, in order. Ids that are not dead letters
(unknown, pending or published) are ignored and reported. --all replays every dead letter.`
	}
	cmd := &cobra.Command{
		Use:   verb + " <event-id>... | --all",
		Short: short,
		Long:  long,
		Example: fmt.Sprintf(`  outboxkit dead-letters %[1]s --config outboxkit.yaml 0190a5c4-7c1e-7d3a-9a53-3c8e2d3f1b2a
  outboxkit dead-letters list --json | jq -r '.[].event_id' | xargs outboxkit dead-letters %[1]s`, verb),
		Args: func(_ *cobra.Command, args []string) error {
			if all && len(args) > 0 {
				return usageErr(fmt.Errorf("give either event ids or --all, not both"))
			}
			if !all && len(args) == 0 {
				return usageErr(fmt.Errorf("%s needs at least one event id (or --all)", verb))
			}
			if all && !replay && !yes && !dryRun {
				return usageErr(errors.New("discard --all deletes every dead letter for good: add --yes to confirm"))
			}
			_, err := parseEventIDs(args)
			return err
		},
		RunE: a.runE(func(cmd *cobra.Command, args []string) error {
			ids, _ := parseEventIDs(args) // validated by Args
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*adminTimeout)
			defer cancel()
			adm, db, err := a.openAdmin(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			if dryRun {
				res, err := runAction(ctx, adm, verb, admin.EventFilter{EventIDs: ids}, true)
				if err != nil {
					return withMigrateHint(fmt.Errorf("%s --dry-run: %w", verb, err))
				}
				return printAction(a.stdout, res)
			}
			act := adm.Discard
			if replay {
				act = adm.Replay
			}
			if all {
				n, err := actOnAll(ctx, adm, act)
				if err != nil {
					return withMigrateHint(fmt.Errorf("%s --all: %s %d dead letters, then: %w", verb, past, n, err))
				}
				fmt.Fprintf(a.stdout, "%s %d dead letters\n", past, n)
				return nil
			}
			n, err := act(ctx, ids...)
			if err != nil {
				return withMigrateHint(fmt.Errorf("%s: %w", verb, err))
			}
			fmt.Fprintf(a.stdout, "%s %d of %d events\n", past, n, len(ids))
			if int(n) < len(ids) {
				fmt.Fprintf(a.stderr, "%d of the given ids are not dead letters (unknown, pending or already published) and were left alone\n", len(ids)-int(n))
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, verb+" every dead letter of the outbox table")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the dead letters it would "+verb+" (dead or skipped) and change nothing")
	if !replay {
		cmd.Flags().BoolVar(&yes, "yes", false, "confirm discard --all (required with --all)")
	}
	return cmd
}

// actOnAll applies act to every dead letter, a page at a time, until none is left.
func actOnAll(ctx context.Context, adm *admin.Admin, act func(context.Context, ...uuid.UUID) (int64, error)) (int64, error) {
	var total int64
	// Each event is acted on once: a replayed event that a running relay dead-letters again
	// while this loop runs is left for the next invocation instead of looping forever.
	done := map[uuid.UUID]bool{}
	for {
		page, err := adm.DeadLetters(ctx, allPageSize)
		if err != nil {
			return total, err
		}
		var ids []uuid.UUID
		for _, d := range page {
			if !done[d.EventID] {
				done[d.EventID] = true
				ids = append(ids, d.EventID)
			}
		}
		if len(ids) == 0 {
			return total, nil
		}
		n, err := act(ctx, ids...)
		total += n
		if err != nil {
			return total, err
		}
		if n == 0 {
			// Another operator took these rows between the two queries: nothing left to do here.
			return total, nil
		}
	}
}

// parseEventIDs parses and deduplicates event ids, naming the first bad one.
func parseEventIDs(args []string) ([]uuid.UUID, error) {
	ids := make([]uuid.UUID, 0, len(args))
	seen := map[uuid.UUID]bool{}
	for i, arg := range args {
		id, err := uuid.Parse(arg)
		if err != nil {
			return nil, usageErr(fmt.Errorf("argument %d: %q is not an event id (a UUID such as 0190a5c4-7c1e-7d3a-9a53-3c8e2d3f1b2a)", i+1, arg))
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}
