package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
	"github.com/outboxkit/outboxkit/outbox"
)

// adoptFlags are the flags of `outboxkit adopt`.
type adoptFlags struct {
	mapping                 string
	dryRun, undo, dropRelay bool
}

func (a *app) adoptCommand() *cobra.Command {
	var f adoptFlags
	cmd := &cobra.Command{
		Use:   "adopt",
		Short: "Relay an outbox table your services already write (PostgreSQL, MariaDB/MySQL), without changing them",
		Long: `adopt connects a team's own outbox table (the mapping file: its table, its columns, the topic
template and its status values) to outboxkit's table, the relay table named by database.table of
--config, which it creates or migrates:

  - a trigger on the team's table copies each row inserted with the pending status into the relay
    table in the same transaction (a rolled-back INSERT copies nothing), where it gets the key
    hash, partition and per-key order of every outboxkit writer;
  - a trigger on the relay table marks the team's row: published (and published_at) once the
    relay acknowledged it, failed once it is dead, retry_count / next_retry_at / last_error after
    each failed attempt;
  - the team's rows still pending are copied once, in created_at order (MariaDB/MySQL: under
    LOCK TABLES, since their DDL commits at once; the team's writers wait for it).

Running it again changes nothing and says so. Stop the team's old relay first. --undo removes the
triggers (with --drop-relay-table the relay table too), leaving the team's table and rows as they
are. --dry-run prints the SQL instead of running it. See docs/adopting.md.`,
		Example: `  outboxkit adopt --config outboxkit.yaml --mapping adopt.yaml --dry-run
  outboxkit adopt --config outboxkit.yaml --mapping adopt.yaml
  outboxkit relay --config outboxkit.yaml
  outboxkit adopt --config outboxkit.yaml --mapping adopt.yaml --undo --drop-relay-table`,
		Args: cobra.NoArgs,
		RunE: a.runE(func(cmd *cobra.Command, _ []string) error { return a.runAdopt(cmd, f) }),
	}
	cmd.Flags().StringVar(&f.mapping, "mapping", "adopt.yaml", "path of the mapping file: the team's table and columns (docs/adopting.md)")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "print the SQL adopt (or --undo) would run, changing nothing")
	cmd.Flags().BoolVar(&f.undo, "undo", false, "remove the adoption's triggers and functions, leaving the team's table and rows untouched")
	cmd.Flags().BoolVar(&f.dropRelay, "drop-relay-table", false, "with --undo: drop the relay table and its relay tables too")
	return cmd
}

func (a *app) runAdopt(cmd *cobra.Command, f adoptFlags) error {
	if f.dropRelay && !f.undo {
		return usageErr(errors.New("--drop-relay-table goes with --undo"))
	}
	cfg, err := a.loadConfig(false)
	if err != nil {
		return err
	}
	mapping, err := relayconfig.LoadAdopt(f.mapping)
	if err != nil {
		return usageErr(err)
	}
	relay, err := outbox.NewTable(cfg.Database.Dialect, cfg.Database.Table)
	if err != nil {
		return usageErr(fmt.Errorf("database.table: %w", err))
	}
	if relay.Dialect() != outbox.Postgres && relay.Dialect() != outbox.MySQL {
		return usageErr(fmt.Errorf("database.dialect %s: adopt supports postgres and mysql (MariaDB/MySQL) only", relay.Dialect()))
	}
	if f.undo && f.dryRun {
		stmts, err := outbox.UnadoptStatements(relay, mapping, f.dropRelay)
		if err != nil {
			return usageErr(err)
		}
		printStatements(a.stdout, stmts)
		return nil
	}
	db, err := openDB(cfg.Database)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx := cmd.Context()
	switch {
	case f.undo:
		if err := outbox.Unadopt(ctx, db, relay, mapping, f.dropRelay); err != nil {
			return adoptErr(err)
		}
		what := "triggers and functions removed"
		if f.dropRelay {
			what += ", relay table " + relay.String() + " dropped"
		}
		fmt.Fprintf(a.stdout, "adoption of %s by %s undone: %s; the team's table and rows are unchanged\n", mapping.Table, relay, what)
	case f.dryRun:
		plan, err := outbox.PlanAdopt(ctx, db, relay, mapping)
		if err != nil {
			return adoptErr(err)
		}
		fmt.Fprintf(a.stdout, "-- first, the migrations of the relay table %s (outboxkit migrate --print)\n", relay)
		printStatements(a.stdout, plan.Install)
		if plan.Backfill != "" {
			placeholder := "$1"
			if relay.Dialect() == outbox.MySQL {
				placeholder = "?"
			}
			fmt.Fprintf(a.stdout, "-- %s = %q\n", placeholder, plan.BackfillArgs[0])
			printStatements(a.stdout, []string{plan.Backfill})
		}
		if plan.Unlock != "" {
			printStatements(a.stdout, []string{plan.Unlock})
		}
	default:
		res, err := outbox.Adopt(ctx, db, relay, mapping)
		if err != nil {
			return adoptErr(err)
		}
		if !res.Changed && res.Backfilled == 0 {
			fmt.Fprintf(a.stdout, "%s is already adopted by %s: nothing changed\n", mapping.Table, relay)
			return nil
		}
		fmt.Fprintf(a.stdout, "%s adopted by %s: triggers installed, %d pending rows copied\n", mapping.Table, relay, res.Backfilled)
	}
	return nil
}

// adoptErr makes a configuration error found against the catalog a usage error.
func adoptErr(err error) error {
	if errors.Is(err, outbox.ErrInvalidAdoptConfig) {
		return usageErr(err)
	}
	return err
}

func printStatements(w io.Writer, stmts []string) {
	for _, stmt := range stmts {
		fmt.Fprintln(w, strings.TrimSpace(stmt)+";")
	}
}
