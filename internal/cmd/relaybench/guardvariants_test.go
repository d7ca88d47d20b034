package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestGuardVariantsRefuseWithoutASlot: every guard variant the write table compares is a guard
// (a write fails, through database/sql and through a pgx batch, and commits no business row,
// before the slot exists and after it is dropped, and succeeds while it exists), and the srf
// floor, which is measured as no guard, is not one.
func TestGuardVariantsRefuseWithoutASlot(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	ctx := context.Background()
	// Everything in a schema of its own, dropped at the end with all it holds.
	name := testsupport.UniqueName("bench_guard")
	if _, err := db.Exec("CREATE SCHEMA " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP SCHEMA " + name + " CASCADE") })
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: name + ".orders", Mode: outbox.ModeWAL, WALSlot: name + "_slot"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = outbox.DropWALSlot(context.WithoutCancel(ctx), db, w.Table(), name+"_slot") })
	if err := outbox.Migrate(ctx, db, w.Table()); err != nil {
		t.Fatal(err)
	}
	business := name + ".business"
	if _, err := db.Exec("CREATE TABLE " + business + " (id BIGSERIAL PRIMARY KEY, note TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	drop, err := createBenchEmit(ctx, db, w.Table())
	if err != nil {
		t.Fatal(err)
	}
	defer drop()
	conn, err := pgx.Connect(ctx, testsupport.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	insert := "INSERT INTO " + business + " (note) VALUES ($1)"
	settings := guardVariantSettings(w, name+"_slot", -1, -1)
	// write runs every setting once and returns the errors by label.
	write := func() map[string]error {
		errs := map[string]error{}
		for _, s := range settings {
			c := conn
			if !s.pgx {
				c = nil
			}
			errs[s.label] = writeEmitQuery(ctx, db, c, insert, s.emitQuery, s.rowCheck, makeEvent("bench.guard", 1, 10, 16, false))
		}
		return errs
	}
	rows := func() int {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM " + business).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	refused := func(when string) {
		t.Helper()
		before := rows()
		floors := 0
		for label, err := range write() {
			if strings.Contains(label, "srf floor") {
				if err != nil {
					t.Errorf("%s %s: the floor is no guard and should commit, got %v", label, when, err)
				}
				floors++
				continue
			}
			if err == nil {
				t.Errorf("%s %s: committed, want a refusal", label, when)
			}
		}
		if got := rows() - before; got != floors {
			t.Errorf("%s: %d business rows committed, want %d (the srf floor's only)", when, got, floors)
		}
	}
	refused("before the slot exists")
	if _, err := outbox.CreateWALSlot(ctx, db, w.Table(), name+"_slot"); err != nil {
		t.Fatal(err)
	}
	for label, err := range write() {
		if err != nil {
			t.Errorf("%s with the slot: %v", label, err)
		}
	}
	if _, err := db.Exec("SELECT pg_drop_replication_slot($1)", name+"_slot"); err != nil {
		t.Fatal(err)
	}
	refused("after the slot is dropped")
}
