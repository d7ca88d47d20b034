package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/outbox"
)

// printSlots prints the status lines of the cdc replication slots, if any.
func printSlots(w io.Writer, slots []admin.SlotStatus) error {
	if len(slots) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tSTATE\tWAL_STATUS\tLAG\tDRAINED")
	for _, s := range slots {
		switch {
		case s.Missing:
			fmt.Fprintf(tw, "%s\tMISSING (not created yet, or lost: the relay recreates it and drains the table)\t-\t-\t-\n", s.Name)
			continue
		case s.WALStatus == "lost":
			fmt.Fprintf(tw, "%s\tLOST (invalidated; the relay drops, recreates it and drains the table)\tlost\t-\t%v\n", s.Name, s.Drained)
			continue
		}
		state := "idle (no relay streams it)"
		if s.Active {
			state = fmt.Sprintf("streaming (walsender PID %d)", s.ActivePID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\n", s.Name, state, s.WALStatus, formatBytes(s.LagBytes), s.Drained)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if p := slots[0].Publication; p != "" {
		fmt.Fprintf(w, "publication: %s\n", p)
	}
	// Waiting and the publication are the table's, the same on every slot: said once.
	if s := slots[0]; s.Waiting > 0 && s.OldestWaiting > forwarder.DefaultCDCStallAfter {
		_, err := fmt.Fprintf(w, "STALLED? %d pending rows not on the retry path, the oldest waiting for %s (over %s): "+
			"a slot far behind (LAG) is still catching up; otherwise the stream does not deliver them "+
			"(see the relay's \"cdc: stream stalled\" warning and docs/cdc.md, Stalls)\n",
			s.Waiting, s.OldestWaiting.Round(time.Second), forwarder.DefaultCDCStallAfter)
		return err
	}
	return nil
}

// formatBytes prints a byte count for humans: 512 B, 3.2 MiB.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func (a *app) cdcCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cdc",
		Short: "Operate the cdc source's replication slots (PostgreSQL)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(a.slotsCommand(), a.dropSlotCommand())
	return cmd
}

// streamedGroups returns the configured lease group when forwarder.source is cdc (its slot is
// listed even when it does not exist), and nothing with polling (only the slots that exist).
func streamedGroups(cfg relayconfig.Config) []string {
	if forwarder.Source(cfg.Forwarder.Source) != forwarder.SourceCDC {
		return nil
	}
	if cfg.Forwarder.LeaseGroup != "" {
		return []string{cfg.Forwarder.LeaseGroup}
	}
	return []string{forwarder.DefaultLeaseGroup(cfg.Forwarder.Tenants)}
}

func (a *app) slotsCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "slots",
		Short: "List the table's replication slots: who streams them, their WAL status and the WAL they pin",
		Long: `slots prints the lines status prints for the cdc source's replication slots of the table
(with forwarder.source cdc, the slot of the configured lease group is listed as MISSING when it
does not exist):
whether a relay streams it, its wal_status ("lost": invalidated by max_slot_wal_keep_size),
the WAL it pins (LAG) and whether the table was drained into it, then the publication the slots
stream (its name includes the table's installation). A STALLED? line follows when
pending rows not on the retry path have waited longer than 30s (forwarder.DefaultCDCStallAfter):
a slot far behind is still catching up; otherwise the stream does not deliver them (docs/cdc.md).

--json prints them as a JSON array, for scripts and monitoring.`,
		Example: `  outboxkit cdc slots --config outboxkit.yaml
  outboxkit cdc slots --config outboxkit.yaml --json | jq '.[] | select(.wal_status == "lost" or .missing)'`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), adminTimeout)
			defer cancel()
			cfg, err := a.loadConfig(false)
			if err != nil {
				return err
			}
			if cfg.Database.Dialect != outbox.Postgres {
				return usageErr(fmt.Errorf("cdc slots: the cdc source needs PostgreSQL, and database.dialect is %s", cfg.Database.Dialect))
			}
			adm, db, err := openAdminFor(ctx, cfg)
			if err != nil {
				return err
			}
			defer db.Close()
			slots, err := adm.Slots(ctx, streamedGroups(cfg)...)
			if err != nil {
				return withMigrateHint(fmt.Errorf("cdc slots: %w", err))
			}
			if !asJSON {
				return printSlots(a.stdout, slots)
			}
			enc := json.NewEncoder(a.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(adminapi.Slots(slots)) // the admin API's /api/v1/slots elements
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false,
		"print a JSON array of {name, lease_group, missing, active, active_pid, wal_status, lag_bytes, drained,"+
			" waiting_rows, oldest_waiting_seconds} instead of a table")
	return cmd
}

func (a *app) dropSlotCommand() *cobra.Command {
	var (
		group          string
		yes, terminate bool
	)
	cmd := &cobra.Command{
		Use:   "drop-slot",
		Short: "Drop the replication slot of a lease group (asks first)",
		Long: `drop-slot drops the logical replication slot the cdc source streams for a lease group
(forwarder.lease_group, or the default group of forwarder.tenants), after asking on the
terminal unless --yes is given.

No event is lost: the outbox table is the source of truth. The next relay recreates the slot
and drains the table first (in seq order). Drop a slot to release the WAL it pins (an
abandoned lease group, or a switch back to forwarder.source polling). A slot being streamed
is refused unless --terminate: its walsender is then terminated first.`,
		Example: `  outboxkit cdc drop-slot --config outboxkit.yaml
  outboxkit cdc drop-slot --config outboxkit.yaml --lease-group tenants:a,b --yes`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), adminTimeout)
			defer cancel()
			cfg, err := a.loadConfig(false)
			if err != nil {
				return err
			}
			if group == "" {
				group = cfg.Forwarder.LeaseGroup
			}
			if group == "" {
				group = forwarder.DefaultLeaseGroup(cfg.Forwarder.Tenants)
			}
			adm, db, err := openAdminFor(ctx, cfg)
			if err != nil {
				return err
			}
			defer db.Close()
			slots, err := adm.Slots(ctx, group)
			if err != nil {
				return err
			}
			var slot admin.SlotStatus
			for _, s := range slots {
				if s.LeaseGroup == group {
					slot = s
				}
			}
			if slot.Missing {
				return fmt.Errorf("cdc drop-slot: lease group %q of table %s has no replication slot (%s)", group, cfg.Database.Table, slot.Name)
			}
			if !yes {
				fmt.Fprintf(a.stdout, "Drop replication slot %s of table %s, lease group %q (it pins %s of WAL)? "+
					"The next relay drains the table instead. [y/N] ", slot.Name, cfg.Database.Table, group, formatBytes(slot.LagBytes))
				answer, _ := bufio.NewReader(a.stdin).ReadString('\n')
				if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
					return usageErr(errors.New("cdc drop-slot: not confirmed, nothing dropped"))
				}
			}
			name, err := adm.DropSlot(ctx, group, terminate)
			if err != nil {
				if errors.Is(err, admin.ErrSlotActive) {
					return usageErr(fmt.Errorf("cdc drop-slot: %w; add --terminate to end it", err))
				}
				return fmt.Errorf("cdc drop-slot: %w", err)
			}
			fmt.Fprintf(a.stdout, "dropped replication slot %s\n", name)
			return nil
		}),
	}
	cmd.Flags().StringVar(&group, "lease-group", "", "the lease group whose slot to drop (default: the configuration's)")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.Flags().BoolVar(&terminate, "terminate", false, "terminate the walsender of a slot being streamed first")
	return cmd
}
