package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
	"github.com/outboxkit/outboxkit/forwarder/admin"
)

func (a *app) deadLettersShowCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show <event-id>",
		Short: "Show one event of the outbox table whole: state, attempts, last error, headers and payload",
		Long: `show prints one event of the outbox table, in whatever state it is (dead, skipped, retrying,
pending, published and retained): its key, topic, type, attempts, next attempt, failure group,
last error, headers and payload (as text when it is text, else base64). An event the table no
longer holds (published and removed) is an error.`,
		Example: `  outboxkit dead-letters show --config outboxkit.yaml 0190a5c4-7c1e-7d3a-9a53-3c8e2d3f1b2a
  outboxkit dead-letters show --config outboxkit.yaml 0190a5c4-7c1e-7d3a-9a53-3c8e2d3f1b2a --json | jq -r .payload`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr(fmt.Errorf("show takes one event id, got %d arguments", len(args)))
			}
			_, err := parseEventIDs(args)
			return err
		},
		RunE: a.runE(func(cmd *cobra.Command, args []string) error {
			id := uuid.MustParse(args[0]) // validated by Args
			return a.withAdmin(cmd.Context(), func(ctx context.Context, adm *admin.Admin) error {
				d, err := adm.Event(ctx, id)
				if errors.Is(err, admin.ErrEventNotFound) {
					return fmt.Errorf("dead-letters show: event %s is not in the outbox table (never written, or published and removed)", id)
				}
				if err != nil {
					return withMigrateHint(fmt.Errorf("dead-letters show: %w", err))
				}
				if asJSON {
					return printJSON(a.stdout, adminapi.Detail(d))
				}
				return printDetail(a.stdout, d)
			})
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the event as a JSON object (payload as text, or payload_base64)")
	return cmd
}

func printDetail(w io.Writer, d admin.EventDetail) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	next := "-"
	if !d.NextAttempt.IsZero() {
		next = d.NextAttempt.UTC().Format(time.RFC3339)
	}
	key := admin.Key{TenantID: d.TenantID, AggregateType: d.AggregateType, AggregateID: d.AggregateID}
	for _, line := range [][2]string{
		{"event id", d.EventID.String()}, {"seq", fmt.Sprint(d.Seq)}, {"state", d.State}, {"topic", d.Topic},
		{"key", key.String()}, {"event type", d.EventType}, {"created", d.CreatedAt.UTC().Format(time.RFC3339Nano)},
		{"attempts", fmt.Sprint(d.Attempts)}, {"next attempt", next}, {"partition", fmt.Sprint(d.Partition)},
		{"group", d.Fingerprint}, {"last error", d.LastError},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", line[0], line[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "headers:")
	for _, k := range slices.Sorted(maps.Keys(d.Headers)) {
		fmt.Fprintf(w, "  %s: %s\n", k, d.Headers[k])
	}
	if text, ok := adminapi.PayloadText(d.Payload); ok {
		fmt.Fprintf(w, "payload (%d bytes):\n%s\n", len(d.Payload), text)
	} else {
		fmt.Fprintf(w, "payload (%d bytes, binary; --json prints it as base64)\n", len(d.Payload))
	}
	return nil
}

func (a *app) deadLettersGroupsCommand() *cobra.Command {
	var (
		flags  filterFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "Group the dead letters and blocked keys by failure fingerprint, largest group first",
		Long: `groups puts the dead letters (and skipped events) and the blocked keys whose last errors share a
fingerprint in one group: the error text with its ids, numbers and addresses replaced by
placeholders. Act on a whole group with 'keys skip|replay|discard --group FINGERPRINT'.`,
		Example: `  outboxkit dead-letters groups --config outboxkit.yaml
  outboxkit keys replay --config outboxkit.yaml --group 3f2a9c01b7de --dry-run`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			filter, err := flags.eventFilter(time.Now())
			if err != nil {
				return err
			}
			return a.withAdmin(cmd.Context(), func(ctx context.Context, adm *admin.Admin) error {
				groups, err := adm.FailureGroups(ctx, filter)
				if err != nil {
					return withMigrateHint(fmt.Errorf("dead-letters groups: %w", err))
				}
				if asJSON {
					return printJSON(a.stdout, adminapi.Groups(groups))
				}
				if len(groups) == 0 {
					fmt.Fprintln(a.stdout, "no failures: no dead letters, no blocked keys")
					return nil
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "GROUP\tDEAD\tSKIPPED\tBLOCKED KEYS\tTOPICS\tERROR")
				for _, g := range groups {
					fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", g.Fingerprint, g.DeadLetters, g.Skipped, g.BlockedKeys,
						strings.Join(g.Topics, ","), truncate(g.Normalised, 80))
				}
				return tw.Flush()
			})
		}),
	}
	flags.register(cmd.Flags(), true)
	cmd.Flags().IntVar(&flags.limit, "limit", admin.DefaultListLimit, "list at most this many groups")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of {fingerprint, normalised_error, example_error, dead_letters, skipped, blocked_keys, topics, oldest, newest}")
	return cmd
}
