package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
	"github.com/outboxkit/outboxkit/outbox"
)

func (a *app) migrateCommand() *cobra.Command {
	var printOnly bool
	var identity identityAction
	var walSlot string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the outbox table, its indexes and the relay's tables",
		Long: `migrate applies outboxkit's embedded, versioned schema migrations to the database of the
configuration's database section (dialect, dsn, table). It is idempotent: migrations already
recorded in the table's migrations table are skipped, and several processes may run it at once.

With --print it connects to nothing and prints the SQL of every migration for the configured
dialect and table instead, for review or for a migration tool of your own.

The table's installation identity is bound to the database it was made in (PostgreSQL: the
cluster's system identifier and the database's OID; MySQL: server_uuid and the schema; MariaDB:
the schema). In a copy of that database (a restored dump, CREATE DATABASE ... TEMPLATE, a staging
copy of production) the relays refuse to start until one of these is run, once:
  --reidentify  the copy runs next to the original: a new identity, and the old identity's
                exactly-once unit marks, cdc slot records and cdc publication dropped from the copy
  --rebind      the same installation moved, the original gone (pg_upgrade, a restore after a
                loss): the identity, its units and checkpoints are kept

With --wal-slot SLOT (PostgreSQL, the wal source) it then creates and registers the replication
slot the wal relay will read, so that writers may emit from the start (outboxkit wal-slot create).`,
		Example: `  outboxkit migrate --config outboxkit.yaml
  outboxkit migrate --config outboxkit.yaml --wal-slot orders_wal
  outboxkit migrate --config outboxkit.yaml --print > outbox.sql
  outboxkit migrate --config staging.yaml --reidentify`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig(false)
			if err != nil {
				return err
			}
			table, err := outbox.NewTable(cfg.Database.Dialect, cfg.Database.Table)
			if err != nil {
				return usageErr(fmt.Errorf("database.table: %w", err))
			}
			if printOnly {
				return printMigrations(a.stdout, table)
			}
			db, err := openDB(cfg.Database)
			if err != nil {
				return err
			}
			defer db.Close()
			logger := a.newLogger(cfg.Log, a.stderr)
			if err := migrate(cmd.Context(), db, cfg.Database, table, logger, 1); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "outbox table %s is up to date (%s)\n", table, cfg.Database.Dialect)
			if err := identity.run(cmd.Context(), a.stdout, db, table); err != nil || walSlot == "" {
				return err
			}
			return a.createWALSlot(cmd.Context(), db, table, walSlot)
		}),
	}
	cmd.Flags().BoolVar(&printOnly, "print", false,
		"print the SQL of every migration for the configured dialect and table instead of running it (connects to nothing)")
	cmd.Flags().BoolVar(&identity.reidentify, "reidentify", false,
		"after migrating, give this database's outbox a new installation identity bound to it and drop the old identity's "+
			"exactly-once unit marks, cdc slot records and cdc publication (a restored copy running next to the original)")
	cmd.Flags().BoolVar(&identity.rebind, "rebind", false,
		"after migrating, bind the installation identity to this database, keeping it (the same installation moved, the original gone)")
	cmd.Flags().StringVar(&walSlot, "wal-slot", "",
		"after migrating, create the wal source's replication slot of this name and register it, so ModeWAL writers may emit "+
			"(PostgreSQL; outboxkit wal-slot create)")
	cmd.MarkFlagsMutuallyExclusive("print", "reidentify", "rebind")
	cmd.MarkFlagsMutuallyExclusive("print", "wal-slot")
	return cmd
}

// migrate runs outbox.Migrate, first waiting for the database up to attempts pings (doubling
// waits from 500ms), so a relay started together with its database does not fail at once.
func migrate(ctx context.Context, db *sql.DB, cfg relayconfig.Database, table outbox.Table, logger *slog.Logger, attempts int) error {
	wait := 500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := pingDB(ctx, db, cfg, 5*time.Second)
		if err == nil {
			break
		}
		if attempt >= attempts || ctx.Err() != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		logger.Warn("database not ready, retrying", "attempt", attempt, "of", attempts, "error", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("migrate: %w", ctx.Err())
		}
		wait *= 2
	}
	start := time.Now()
	if err := outbox.Migrate(ctx, db, table); err != nil {
		return fmt.Errorf("migrate outbox table %s: %w", table, err)
	}
	logger.Info("outbox schema migrated", "table", table.String(), "dialect", string(cfg.Dialect), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func printMigrations(w io.Writer, table outbox.Table) error {
	migrations, err := outbox.Migrations(table)
	if err != nil {
		return fmt.Errorf("render migrations of %s: %w", table, err)
	}
	fmt.Fprintf(w, "-- outboxkit schema for table %s (%s)\n", table, table.Dialect())
	for _, m := range migrations {
		fmt.Fprintf(w, "\n-- migration %d: %s\n", m.Version, m.Name)
		for _, stmt := range m.Statements {
			stmt = strings.TrimSpace(stmt)
			if !strings.HasSuffix(stmt, ";") {
				stmt += ";"
			}
			fmt.Fprintln(w, stmt)
		}
	}
	return nil
}
