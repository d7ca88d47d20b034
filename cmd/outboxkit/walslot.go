package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outboxkit/outboxkit/outbox"
)

// walSlotCommand operates the replication slots the wal source reads (docs/wal.md, "The slot").
func (a *app) walSlotCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "wal-slot",
		Short: "Create, show, reset or drop the wal source's replication slot (PostgreSQL)",
		Long: `With the wal source (outbox.ModeWAL writers, <table>_emit) an event lives only in the WAL until
the relay publishes it, and only a replication slot keeps it there. So writers emit only while
every slot registered for the outbox (table <table>_wal_slots) exists and is not invalidated,
and a relay refuses to start on a registered slot that is gone. These commands manage that
register and its slots; see docs/wal.md and the runbook in docs/cdc.md.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(a.walSlotCreateCommand(), a.walSlotShowCommand(), a.walSlotResetCommand(), a.walSlotDropCommand())
	return cmd
}

// withWALSlot loads the configuration, checks the dialect and the slot name, opens the database
// and runs f.
func (a *app) withWALSlot(ctx context.Context, slot string, f func(db *sql.DB, table outbox.Table) error) error {
	cfg, err := a.loadConfig(false)
	if err != nil {
		return err
	}
	if cfg.Database.Dialect != outbox.Postgres {
		return usageErr(fmt.Errorf("wal-slot: the wal source needs PostgreSQL, and database.dialect is %s", cfg.Database.Dialect))
	}
	if err := outbox.ValidateSlotName(slot); err != nil {
		return usageErr(err)
	}
	table, err := outbox.NewTable(cfg.Database.Dialect, cfg.Database.Table)
	if err != nil {
		return usageErr(fmt.Errorf("database.table: %w", err))
	}
	db, err := openDB(cfg.Database)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := f(db, table); err != nil && !errors.Is(err, outbox.ErrWALSlotLost) {
		return withMigrateHint(err)
	} else if err != nil {
		return err
	}
	return nil
}

func (a *app) walSlotCreateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "create SLOT",
		Short: "Create the wal source's replication slot and register it, so writers may emit",
		Long: `create makes SLOT the outbox's wal slot: it creates the logical replication slot (plugin
pgoutput) unless it exists, and registers it. Until a slot is registered, writers are refused.
It is idempotent, and it never re-creates a registered slot that is gone (see reset). The wal
relay does the same on its first start; outboxkit migrate --wal-slot SLOT does it after
migrating.`,
		Example: `  outboxkit wal-slot create orders_wal --config outboxkit.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: a.runE(func(cmd *cobra.Command, args []string) error {
			return a.withWALSlot(cmd.Context(), args[0], func(db *sql.DB, table outbox.Table) error {
				return a.createWALSlot(cmd.Context(), db, table, args[0])
			})
		}),
	}
}

// createWALSlot creates and registers slot (wal-slot create, migrate --wal-slot).
func (a *app) createWALSlot(ctx context.Context, db *sql.DB, table outbox.Table, slot string) error {
	if table.Dialect() != outbox.Postgres {
		return usageErr(fmt.Errorf("wal slot %s: the wal source needs PostgreSQL, and database.dialect is %s", slot, table.Dialect()))
	}
	if err := outbox.ValidateSlotName(slot); err != nil {
		return usageErr(err)
	}
	created, err := outbox.CreateWALSlot(ctx, db, table, slot)
	if err != nil {
		return fmt.Errorf("wal-slot create: %w", err)
	}
	verb := "is registered"
	if created {
		verb = "created and registered"
	}
	fmt.Fprintf(a.stdout, "replication slot %s %s for outbox %s\n", slot, verb, table)
	return nil
}

func (a *app) walSlotShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show SLOT",
		Short: "Show the wal slot's state; exit 1 when it is lost",
		Long: `show prints whether SLOT is registered for the outbox, whether it exists, its wal_status, the
WAL between the server's position and its confirmed one (LAG: what a loss would lose) and, with
max_slot_wal_keep_size, the WAL that can still be written before it is invalidated. A lost slot
(registered but gone or invalidated) is an error, with what to do.`,
		Example: `  outboxkit wal-slot show orders_wal --config outboxkit.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: a.runE(func(cmd *cobra.Command, args []string) error {
			return a.withWALSlot(cmd.Context(), args[0], func(db *sql.DB, table outbox.Table) error {
				st, err := outbox.ReadWALSlot(cmd.Context(), db, table, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "slot %s of outbox %s: registered %v, exists %v, wal_status %q, active %v, lag %s",
					st.Slot, table, st.Registered, st.Exists, st.WALStatus, st.Active, formatBytes(st.LagBytes))
				if st.SafeWALLimited {
					fmt.Fprintf(a.stdout, ", %s of WAL before max_slot_wal_keep_size invalidates it", formatBytes(st.SafeWALBytes))
				}
				fmt.Fprintln(a.stdout)
				if st.Lost() {
					return st.LostError(table)
				}
				return nil
			})
		}),
	}
}

func (a *app) walSlotResetCommand() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "reset SLOT",
		Short: "Replace a lost wal slot by a new one (asks first)",
		Long: `reset replaces SLOT, registered and lost (dropped, invalidated, or missing after a failover),
by a new slot of the same name starting at the server's current position; an invalidated slot is
dropped first. Writers may emit again and the relay may start. It is the operator's
acknowledgement that the events committed between the old slot's last confirmed position and
the moment writers were refused are lost: find them and re-send what the business needs first
(docs/cdc.md, runbook). A usable slot is refused.`,
		Example: `  outboxkit wal-slot reset orders_wal --config outboxkit.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: a.runE(func(cmd *cobra.Command, args []string) error {
			return a.withWALSlot(cmd.Context(), args[0], func(db *sql.DB, table outbox.Table) error {
				if err := a.confirm(yes, fmt.Sprintf("Replace the lost replication slot %s of outbox %s by a new one? "+
					"The events it had not delivered stay lost.", args[0], table)); err != nil {
					return err
				}
				if err := outbox.ResetWALSlot(cmd.Context(), db, table, args[0]); err != nil {
					return fmt.Errorf("wal-slot reset: %w", err)
				}
				fmt.Fprintf(a.stdout, "replication slot %s of outbox %s replaced; writers may emit again\n", args[0], table)
				return nil
			})
		}),
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return cmd
}

func (a *app) walSlotDropCommand() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "drop SLOT",
		Short: "Drop the wal slot and unregister it (asks first)",
		Long: `drop retires SLOT: it drops the replication slot if it exists, removes it from the register and
drops the publication of its name (which create made for the relay).
Writers configured with it (outbox.Config.WALSlot) and <table>_emit, once no slot is registered,
are refused from then on: switch them to ModeTable first. Events the slot had not delivered are
lost.`,
		Example: `  outboxkit wal-slot drop orders_wal --config outboxkit.yaml --yes`,
		Args:    cobra.ExactArgs(1),
		RunE: a.runE(func(cmd *cobra.Command, args []string) error {
			return a.withWALSlot(cmd.Context(), args[0], func(db *sql.DB, table outbox.Table) error {
				if err := a.confirm(yes, fmt.Sprintf("Drop the replication slot %s of outbox %s? Events it has not delivered are lost.",
					args[0], table)); err != nil {
					return err
				}
				if err := outbox.DropWALSlot(cmd.Context(), db, table, args[0]); err != nil {
					return fmt.Errorf("wal-slot drop: %w", err)
				}
				fmt.Fprintf(a.stdout, "dropped and unregistered replication slot %s of outbox %s\n", args[0], table)
				return nil
			})
		}),
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return cmd
}

// confirm asks question on the terminal unless yes; anything but y or yes refuses.
func (a *app) confirm(yes bool, question string) error {
	if yes {
		return nil
	}
	fmt.Fprintf(a.stdout, "%s [y/N] ", question)
	answer, _ := bufio.NewReader(a.stdin).ReadString('\n')
	if s := strings.ToLower(strings.TrimSpace(answer)); s != "y" && s != "yes" {
		return usageErr(errors.New("not confirmed, nothing changed"))
	}
	return nil
}
