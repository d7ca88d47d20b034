package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
	"github.com/outboxkit/outboxkit/outbox"
)

// loadConfig loads the --config file with the process environment; a failure is a usage error.
// The configuration's secrets are remembered for scrubbing.
func (a *app) loadConfig(withBroker bool) (relayconfig.Config, error) {
	cfg, err := relayconfig.Load(a.configPath, os.LookupEnv, relayconfig.Options{Broker: withBroker})
	if err != nil {
		return relayconfig.Config{}, usageErr(err)
	}
	a.scrubber = cfg.Scrubber()
	return cfg, nil
}

// driverName is the database/sql driver the CLI uses for a dialect.
func driverName(d outbox.Dialect) string {
	switch d {
	case outbox.Postgres:
		return "pgx"
	case outbox.MySQL:
		return "mysql"
	default:
		return "sqlite"
	}
}

// openDB opens (without connecting) the configured database.
func openDB(cfg relayconfig.Database) (*sql.DB, error) {
	if err := checkDSN(cfg); err != nil {
		return nil, err
	}
	db, err := sql.Open(driverName(cfg.Dialect), cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("open %s database %s: %w", cfg.Dialect, relayconfig.RedactDSN(cfg.DSN), err)
	}
	if cfg.Dialect == outbox.SQLite {
		// SQLite has a single writer: one connection avoids "database is locked" between the
		// relay's own goroutines.
		db.SetMaxOpenConns(1)
	} else {
		// Capped, so that no burst of requests (probes, the admin API) takes more of the
		// database's max_connections than the configuration gives the relay.
		limit := cfg.MaxOpenConns
		if limit <= 0 {
			limit = relayconfig.DefaultMaxOpenConns
		}
		db.SetMaxOpenConns(limit)
		db.SetMaxIdleConns(min(idleConns, limit))
	}
	return db, nil
}

// idleConns is how many idle connections the CLI's pool keeps. A relay uses several at once (its
// workers, the heartbeat, the statistics, the cdc source's retry path, the admin API); with
// database/sql's default of two, the pool closed and opened again about 200 connections per 10 s
// of a cdc relay at 1,000 events/s (docs/benchmarks.md).
const idleConns = 16

// pingDB checks that the database answers, within timeout.
func pingDB(ctx context.Context, db *sql.DB, cfg relayconfig.Database, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("%s database %s is unreachable: %w", cfg.Dialect, relayconfig.RedactDSN(cfg.DSN), err)
	}
	return nil
}

// newLogger builds the slog logger of the log section, scrubbing secrets from every record.
func (a *app) newLogger(cfg relayconfig.Log, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.Level}
	var h slog.Handler
	if cfg.Format == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	if a.scrubber != nil {
		h = &scrubHandler{Handler: h, scrub: a.scrubber}
	}
	return slog.New(h)
}

// scrubHandler removes secrets from log messages and attribute values. The configuration's own
// LogValue already redacts; this catches an error from a driver or broker client that echoes a
// secret. It is written here because slog has no redaction of its own.
type scrubHandler struct {
	slog.Handler
	scrub func(string) string
}

func (h *scrubHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.scrub(r.Message), r.PC)
	r.Attrs(func(attr slog.Attr) bool {
		out.AddAttrs(h.scrubAttr(attr))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h *scrubHandler) scrubAttr(attr slog.Attr) slog.Attr {
	v := attr.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(attr.Key, h.scrub(v.String()))
	case slog.KindGroup:
		group := v.Group()
		attrs := make([]slog.Attr, len(group))
		for i, a := range group {
			attrs[i] = h.scrubAttr(a)
		}
		return slog.Attr{Key: attr.Key, Value: slog.GroupValue(attrs...)}
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(attr.Key, h.scrub(err.Error()))
		}
		s := fmt.Sprint(v.Any())
		if scrubbed := h.scrub(s); scrubbed != s {
			return slog.String(attr.Key, scrubbed)
		}
	}
	return slog.Attr{Key: attr.Key, Value: v}
}

func (h *scrubHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.scrubAttr(a)
	}
	return &scrubHandler{Handler: h.Handler.WithAttrs(clean), scrub: h.scrub}
}

func (h *scrubHandler) WithGroup(name string) slog.Handler {
	return &scrubHandler{Handler: h.Handler.WithGroup(name), scrub: h.scrub}
}

// truncate shortens s to n runes for a table cell, on one line.
func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// withMigrateHint adds a pointer to `outboxkit migrate` to an error that says the outbox table
// is missing (PostgreSQL, MySQL/MariaDB and SQLite word it differently).
func withMigrateHint(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if strings.Contains(msg, "does not exist") || strings.Contains(msg, "doesn't exist") || strings.Contains(msg, "no such table") {
		return fmt.Errorf("%w (is the schema created? run `outboxkit migrate`)", err)
	}
	return err
}
