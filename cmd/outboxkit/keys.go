package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
	"github.com/outboxkit/outboxkit/forwarder/admin"
)

func (a *app) keysCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "List the ordering keys the relay holds back, and skip, replay or discard their failing events",
		Long: `A key (tenant, aggregate type, aggregate id) is blocked while its first failing event, its head,
is dead (it waits for an operator) or retrying (the relay tries it again later): the later events
of the key wait behind it, every other key flows.

  list     the blocked keys: head event, state, attempts, next attempt, last error, waiting events
  skip     move the head of the selected blocked keys out of the way: it becomes "skipped", kept
           in the table and listed with the dead letters (replayable, discardable), and the later
           events of the key flow again
  replay   make the selected keys' dead and skipped events pending again, with fresh attempts
  discard  delete the selected keys' dead and skipped events for good

Select keys with --key (aggregate_type/aggregate_id, with --tenant for a tenant's key), --group (a
failure fingerprint from 'dead-letters groups'), --topic, --event, or --all. Every action takes
--dry-run: it prints what it would touch and changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.keysListCommand(), a.keysActionCommand(admin.ActionSkip),
		a.keysActionCommand(admin.ActionReplay), a.keysActionCommand(admin.ActionDiscard))
	return cmd
}

func (a *app) keysListCommand() *cobra.Command {
	var (
		flags  filterFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the blocked keys, oldest head first",
		Example: `  outboxkit keys list --config outboxkit.yaml
  outboxkit keys list --config outboxkit.yaml --topic orders --json | jq '.[] | select(.state == "dead")'`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			filter, err := flags.keyFilter()
			if err != nil {
				return err
			}
			return a.withAdmin(cmd.Context(), func(ctx context.Context, adm *admin.Admin) error {
				keys, err := adm.BlockedKeys(ctx, filter)
				if err != nil {
					return withMigrateHint(fmt.Errorf("keys list: %w", err))
				}
				if asJSON {
					return printJSON(a.stdout, adminapi.BlockedKeys(keys))
				}
				return printBlockedKeys(a.stdout, keys, time.Now())
			})
		}),
	}
	flags.register(cmd.Flags(), false)
	cmd.Flags().IntVar(&flags.limit, "limit", admin.DefaultListLimit, "list at most this many keys")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of {key, key_hash, partition, state, head, next_attempt, waiting, blocked_since}")
	return cmd
}

func printBlockedKeys(w io.Writer, keys []admin.BlockedKey, now time.Time) error {
	if len(keys) == 0 {
		fmt.Fprintln(w, "no blocked keys")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSTATE\tHEAD EVENT\tTOPIC\tATTEMPTS\tNEXT ATTEMPT\tWAITING\tBLOCKED FOR\tGROUP\tLAST ERROR")
	for _, k := range keys {
		next := "-"
		if !k.NextAttempt.IsZero() {
			next = "in " + formatAge(k.NextAttempt.Sub(now))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\n", k.Key, k.State, k.Head.EventID, k.Head.Topic, k.Head.Attempts,
			next, k.Waiting, formatAge(now.Sub(k.BlockedSince)), k.Head.Fingerprint, truncate(k.Head.LastError, 60))
	}
	return tw.Flush()
}

// keysActionCommand is `keys skip`, `keys replay` or `keys discard`.
func (a *app) keysActionCommand(action string) *cobra.Command {
	var (
		flags               filterFlags
		all, dryRun, asJSON bool
	)
	short := map[string]string{
		admin.ActionSkip:    "Skip the head event of blocked keys (kept as skipped), so that their later events flow",
		admin.ActionReplay:  "Make the dead and skipped events of the selected keys pending again",
		admin.ActionDiscard: "Delete the dead and skipped events of the selected keys for good",
	}[action]
	cmd := &cobra.Command{
		Use:   action + " (--key TYPE/ID | --group FINGERPRINT | --topic T | --event ID | --all) [--dry-run]",
		Short: short,
		Example: fmt.Sprintf(`  outboxkit keys %[1]s --config outboxkit.yaml --key order/o-1 --dry-run
  outboxkit keys %[1]s --config outboxkit.yaml --group 3f2a9c01b7de`, action),
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErr(fmt.Errorf("%s takes no arguments: select with --key, --group, --topic, --event or --all", action))
			}
			if all == flags.narrowed() {
				return usageErr(errors.New("select the keys with --key, --group, --topic, --tenant or --event, or give --all (not both)"))
			}
			return nil
		},
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			filter, err := flags.eventFilter(time.Now())
			if err != nil {
				return err
			}
			return a.withAdmin(cmd.Context(), func(ctx context.Context, adm *admin.Admin) error {
				res, err := runAction(ctx, adm, action, filter, dryRun)
				if err != nil {
					return withMigrateHint(fmt.Errorf("keys %s: %w", action, err))
				}
				if asJSON {
					return printJSON(a.stdout, adminapi.Action(res))
				}
				return printAction(a.stdout, res)
			})
		}),
	}
	flags.register(cmd.Flags(), false)
	cmd.Flags().BoolVar(&all, "all", false, action+" every blocked key")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what it would touch and change nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {action, dry_run, matched, applied, events}")
	return cmd
}

// runAction runs one of the Admin's actions on the events (or keys) filter selects.
func runAction(ctx context.Context, adm *admin.Admin, action string, filter admin.EventFilter, dryRun bool) (admin.ActionResult, error) {
	switch action {
	case admin.ActionSkip:
		return adm.SkipKeys(ctx, admin.KeyFilter{Topic: filter.Topic, TenantID: filter.TenantID, Key: filter.Key,
			Group: filter.Group, EventIDs: filter.EventIDs}, dryRun)
	case admin.ActionReplay:
		return adm.ReplayDeadLetters(ctx, filter, dryRun)
	case admin.ActionDiscard:
		return adm.DiscardDeadLetters(ctx, filter, dryRun)
	}
	return admin.ActionResult{}, fmt.Errorf("unknown action %q (want skip, replay or discard)", action)
}

func printAction(w io.Writer, res admin.ActionResult) error {
	past := map[string]string{admin.ActionSkip: "skipped", admin.ActionReplay: "replayed", admin.ActionDiscard: "discarded"}[res.Action]
	if res.DryRun {
		fmt.Fprintf(w, "dry run: would %s %d events (nothing changed)\n", res.Action, len(res.Events))
	} else {
		fmt.Fprintf(w, "%s %d of %d events\n", past, res.Applied, len(res.Events))
	}
	if len(res.Events) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EVENT ID\tKEY\tTOPIC\tSTATE\tGROUP")
	for _, e := range res.Events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.EventID, e.Key, e.Topic, e.State, e.Fingerprint)
	}
	return tw.Flush()
}

// withAdmin opens the configured outbox's Admin for f, within adminTimeout.
func (a *app) withAdmin(parent context.Context, f func(ctx context.Context, adm *admin.Admin) error) error {
	ctx, cancel := context.WithTimeout(parent, 5*adminTimeout)
	defer cancel()
	adm, db, err := a.openAdmin(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	return f(ctx, adm)
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printBlocked prints a line about the blocked keys, when there are any, for `outboxkit status`.
func printBlocked(ctx context.Context, w io.Writer, adm *admin.Admin, now time.Time) error {
	keys, err := adm.BlockedKeys(ctx, admin.KeyFilter{Limit: 10000})
	if err != nil || len(keys) == 0 {
		return err
	}
	dead := 0
	for _, k := range keys {
		if k.State == admin.StateDead {
			dead++
		}
	}
	fmt.Fprintf(w, "\nblocked keys: %d (%d dead, %d retrying), the oldest for %s: outboxkit keys list\n",
		len(keys), dead, len(keys)-dead, formatAge(now.Sub(keys[0].BlockedSince)))
	return nil
}
