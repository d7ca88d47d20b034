package forwarder

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/forwarder/internal/lease"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// The store's golden test: every statement the store and the Admin send, rendered for each
// database by running a fixed sequence of operations against the real servers through a
// recording driver, compared with testdata/store_<dialect>.sql. Moving the SQL (forwarder v3:
// one store package with a dialect adapter per database) must leave these files
// byte-identical; a change of a statement made on purpose regenerates them
// (go test ./forwarder -run TestStoreGolden -update-golden) in a commit of its own that says why.

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/store_<dialect>.sql from the statements sent")

// goldenTable is the fixed table name the golden statements are rendered with.
const goldenTable = "golden_outbox"

func TestStoreGolden(t *testing.T) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL, outbox.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			got := renderStoreStatements(t, d)
			path := filepath.Join("testdata", "store_"+string(d)+".sql")
			if *updateGolden {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update-golden to create it)", err)
			}
			if got != string(want) {
				t.Errorf("the statements sent differ from %s (diff them: go test ./forwarder -run 'TestStoreGolden/%s' -update-golden && git diff %s):\n%s",
					path, d, path, firstDifference(string(want), got))
			}
		})
	}
}

// firstDifference shows the first line where want and got differ.
func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\nwant: " + wl + "\ngot:  " + gl
		}
	}
	return ""
}

// goldenDB opens the test database of dialect through the recorder, with the golden table
// migrated and holding three events.
func goldenDB(t *testing.T, d outbox.Dialect, rec *recording) (*sql.DB, outbox.Table) {
	t.Helper()
	var db *sql.DB
	var err error
	switch d {
	case outbox.Postgres:
		db, err = openRecording("pgx", testsupport.PostgresDSN(t), rec)
	case outbox.MySQL:
		db, err = openRecording("mysql", testsupport.MySQLDSN(t), rec)
	default:
		db, err = openRecording("sqlite", "file:"+filepath.Join(t.TempDir(), "golden.db")+"?_pragma=busy_timeout(10000)&_txlock=immediate", rec)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	w, err := outbox.NewWriter(outbox.Config{Dialect: d, Table: goldenTable})
	if err != nil {
		t.Fatal(err)
	}
	table := w.Table()
	drop := func() {
		for _, n := range table.Tables() {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + n)
		}
	}
	drop()
	t.Cleanup(drop)
	ctx := context.Background()
	if err := outbox.Migrate(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"k1", "k2", "k1"} {
		e := outbox.Event{ID: uuid.NewSHA1(uuid.Nil, []byte{byte(i)}), Topic: "golden", AggregateType: "order",
			AggregateID: key, EventType: "Happened", Payload: []byte("x")}
		if err := w.WriteTx(ctx, tx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	rec.take() // the migration's and the writer's statements are the outbox package's
	return db, table
}

// goldenRun runs the named operations in order and renders what each sent.
type goldenRun struct {
	t   *testing.T
	rec *recording
	out strings.Builder
}

func (g *goldenRun) step(name string, op func() error) {
	g.t.Helper()
	if err := op(); err != nil {
		g.t.Fatalf("%s: %v", name, err)
	}
	render(&g.out, name, g.rec.take())
}

func renderStoreStatements(t *testing.T, d outbox.Dialect) string {
	rec := &recording{}
	db, table := goldenDB(t, d, rec)
	ctx := context.Background()
	g := &goldenRun{t: t, rec: rec}
	s := &relay.Store{Table: table, Dialect: d, Group: "golden", IdleTimeout: 5 * time.Second}
	const owner = "golden-relay"
	ttl := 10 * time.Second
	all := allPartitions()
	var leases []relay.Lease
	var records []relay.Record

	g.step("ensureLeaseRows", func() error { return s.EnsureLeaseRows(ctx, db) })
	g.step("heartbeat (acquire)", func() error { _, err := s.Heartbeat(ctx, db, owner, ttl, lease.PerPartition{}, nil); return err })
	g.step("liveLeases", func() (err error) { leases, err = s.LiveLeases(ctx, db, owner, 0, 1); return err })
	g.step("releaseDue", func() error { return s.ReleaseDue(ctx, db, all, 100) })
	g.step("nextDue", func() error { _, _, err := s.NextDue(ctx, db, all, time.Second); return err })
	g.step("claim", func() (err error) { records, err = s.Claim(ctx, db, all, 100, 1<<20); return err })
	tenants := &relay.Store{Table: table, Dialect: d, Group: "golden", Tenants: []string{"a", "b"}}
	g.step("claim (tenants)", func() error { _, err := tenants.Claim(ctx, db, all, 100, 1<<20); return err })
	if len(records) != 3 {
		t.Fatalf("claimed %d records, want the 3 written", len(records))
	}
	seqs := []int64{records[0].Seq, records[1].Seq}
	g.step("acknowledge (fence, ack, fail)", func() error {
		return s.InLeaseTx(ctx, db, func(tx *sql.Tx) error {
			if _, err := s.Fence(ctx, tx, owner, leases); err != nil {
				return err
			}
			if err := s.Ack(ctx, tx, seqs[:1], false); err != nil {
				return err
			}
			return s.Fail(ctx, tx, records[2].Seq, 1, time.Now(), false, "golden failure")
		})
	})
	g.step("ack (retain)", func() error { return s.Ack(ctx, db, seqs[1:], true) })
	g.step("fail (dead)", func() error { return s.Fail(ctx, db, records[2].Seq, 2, time.Now(), true, "golden dead") })
	g.step("prune", func() error { _, err := s.Prune(ctx, db, time.Now(), 100); return err })
	g.step("stats", func() error { _, err := s.Stats(ctx, db); return err })
	g.step("ownedPartitions", func() error { _, err := s.OwnedPartitions(ctx, db, owner); return err })
	g.step("renew", func() error { _, err := s.Renew(ctx, db, owner, ttl); return err })
	g.step("release", func() error { _, err := s.Release(ctx, db, owner, all[:2]); return err })
	g.step("acquire", func() error { _, err := s.Acquire(ctx, db, owner, 2, ttl, lease.PerPartition{}); return err })
	g.step("lockLeases (skip locked)", func() error {
		return relay.InTx(ctx, db, func(tx *sql.Tx) error { _, err := s.LockLeases(ctx, tx, all[:4], true); return err })
	})
	g.step("heartbeat (units)", func() error {
		_, err := s.Heartbeat(ctx, db, owner, ttl, lease.Units(8), nil)
		return err
	})
	renderUnitStatements(g, s, db, records)
	if d == outbox.Postgres {
		renderCDCStatements(g, s, db, owner, leases, records)
		renderWALStatements(g, s, db, owner, leases)
	}
	renderAdminStatements(g, db, d, records)
	renderAdminActionStatements(g, db, d)
	renderAdminTenantStatements(g, db, d)
	g.step("releaseAll", func() error { return s.ReleaseAll(ctx, db, owner) })
	return g.out.String()
}

// renderUnitStatements runs the exactly-once bookkeeping statements.
func renderUnitStatements(g *goldenRun, s *relay.Store, db *sql.DB, records []relay.Record) {
	ctx := context.Background()
	const unit = "golden/u00"
	g.step("installationID", func() error { _, err := s.InstallationID(ctx, db); return err })
	g.step("ensureUnitRow", func() error { return s.EnsureUnitRow(ctx, db, unit) })
	g.step("cleanedDigest", func() error { _, err := s.CleanedDigest(ctx, db, unit); return err })
	g.step("recordedUnits", func() error { _, err := s.RecordedUnits(ctx, db, "golden"); return err })
	g.step("recordUnitCount", func() error { return s.RecordUnitCount(ctx, db, "golden", 2) })
	g.step("unitCount", func() error { _, err := s.UnitCount(ctx, db, "golden"); return err })
	g.step("markCleaned", func() error {
		return s.MarkCleaned(ctx, db, []relay.UnitMark{{Name: unit, Digest: "d0"}, {Name: "golden/u01", Digest: "d1"}})
	})
	cp := checkpoint{Rows: []rowRef{{Seq: records[0].Seq, EventID: records[0].Event.ID.String()}},
		Dead: []deadRow{{Seq: records[2].Seq, EventID: records[2].Event.ID.String(), Attempts: 3, Reason: "golden"}}}
	g.step("applyCheckpoint", func() error {
		return relay.InTx(ctx, db, func(tx *sql.Tx) error { _, _, err := s.ApplyCheckpoint(ctx, tx, cp, false, 0); return err })
	})
}

// renderCDCStatements runs the cdc source's statements (PostgreSQL only).
func renderCDCStatements(g *goldenRun, s *relay.Store, db *sql.DB, owner string, leases []relay.Lease, records []relay.Record) {
	ctx := context.Background()
	all := allPartitions()
	g.step("cdc admit", func() error { _, _, err := s.Admit(ctx, db, records); return err })
	g.step("cdc transactionsRunning", func() error { _, err := s.TransactionsRunning(ctx, db, []string{"1"}); return err })
	g.step("cdc markRetry", func() error { _, _, err := s.MarkRetry(ctx, db, owner, leases, records); return err })
	g.step("cdc markParkedUpTo", func() error { _, err := s.MarkParkedUpTo(ctx, db, 100); return err })
	g.step("cdc maxSeq", func() error { _, err := s.MaxSeq(ctx, db); return err })
	g.step("cdc claimRetry", func() error { _, err := s.ClaimRetry(ctx, db, all, 100, 1<<20); return err })
	g.step("cdc claimUpTo", func() error { _, err := s.ClaimUpTo(ctx, db, all, 100, 1<<20, 100); return err })
	g.step("cdc releaseDueByWrite", func() error { _, err := s.ReleaseDueByWrite(ctx, db, 100); return err })
	g.step("cdc otherLiveOwners", func() error { _, err := s.OtherLiveOwners(ctx, db, owner); return err })
	g.step("cdc setSlotDrained", func() error { return s.SetSlotDrained(ctx, db, "golden_slot", true) })
	g.step("cdc slotDrained", func() error { _, err := s.SlotDrained(ctx, db, "golden_slot"); return err })
	g.step("cdc ackFenced", func() error {
		_, err := s.AckFenced(ctx, db, owner, leases, []int64{records[0].Seq}, false)
		return err
	})
	g.step("cdc strandedRows", func() error { _, _, err := s.StrandedRows(ctx, db, time.Minute); return err })
}

// renderWALStatements runs the wal source's statements (PostgreSQL only): parking an event of a
// key, fenced by the leases, the parked keys, and the Admin's view of the source.
func renderWALStatements(g *goldenRun, s *relay.Store, db *sql.DB, owner string, leases []relay.Lease) {
	ctx := context.Background()
	e := outbox.Event{ID: uuid.NewSHA1(uuid.Nil, []byte("wal")), Topic: "golden", AggregateType: "order", AggregateID: "k7",
		EventType: "Happened", Payload: []byte("x"), CreatedAt: time.Unix(1700000000, 0).UTC()}
	hash := outbox.KeyHash(e.TenantID, e.AggregateType, e.AggregateID)
	row := sqlstore.ParkedRow{Event: e, KeyHash: hash, Partition: outbox.PartitionOf(hash), Attempts: 1,
		Next: time.Unix(1700000060, 0).UTC(), Reason: "golden failure"}
	g.step("wal parkFenced", func() error {
		_, err := s.ParkFenced(ctx, db, owner, leases, []sqlstore.ParkedRow{row})
		return err
	})
	g.step("wal parkedKeys", func() error { _, err := s.ParkedKeys(ctx, db); return err })
	adm, err := admin.New(db, outbox.Postgres, goldenTable)
	if err != nil {
		g.t.Fatal(err)
	}
	g.step("admin WAL", func() error { _, err := adm.WAL(ctx, "golden_wal_slot", 10); return err })
}

// renderAdminStatements runs the Admin's statements.
func renderAdminStatements(g *goldenRun, db *sql.DB, d outbox.Dialect, records []relay.Record) {
	ctx := context.Background()
	adm, err := admin.New(db, d, goldenTable)
	if err != nil {
		g.t.Fatal(err)
	}
	ids := []uuid.UUID{records[2].Event.ID}
	g.step("admin Status", func() error { _, err := adm.Status(ctx); return err })
	g.step("admin DeadLetters", func() error { _, err := adm.DeadLetters(ctx, 10); return err })
	g.step("admin Replay", func() error { _, err := adm.Replay(ctx, ids...); return err })
	g.step("admin Discard", func() error { _, err := adm.Discard(ctx, ids...); return err })
}

// renderAdminActionStatements runs the statements of the Admin's filtered listings and actions
// on blocked keys and dead letters, with every filter field set, on a new event made dead.
func renderAdminActionStatements(g *goldenRun, db *sql.DB, d outbox.Dialect) {
	ctx := context.Background()
	adm, err := admin.New(db, d, goldenTable)
	if err != nil {
		g.t.Fatal(err)
	}
	adminTable, err := outbox.NewTable(d, goldenTable) // the Admin's table, for the gauges' statement
	if err != nil {
		g.t.Fatal(err)
	}
	w, err := outbox.NewWriter(outbox.Config{Dialect: d, Table: goldenTable})
	if err != nil {
		g.t.Fatal(err)
	}
	r := relay.Record{Event: outbox.Event{ID: uuid.NewSHA1(uuid.Nil, []byte("admin")), Topic: "golden", AggregateType: "order",
		AggregateID: "k9", EventType: "Happened", Payload: []byte("x")}}
	if err := relay.InTx(ctx, db, func(tx *sql.Tx) error { return w.WriteTx(ctx, tx, r.Event) }); err != nil {
		g.t.Fatal(err)
	}
	if err := db.QueryRow(d.Rebind("SELECT seq FROM "+goldenTable+" WHERE event_id = ?"), r.Event.ID.String()).Scan(&r.Seq); err != nil {
		g.t.Fatal(err)
	}
	kill := func() {
		query := d.Rebind("UPDATE " + goldenTable + " SET status = 2, attempts = 3, last_error = 'golden dead' WHERE seq = ?")
		if _, err := db.Exec(query, r.Seq); err != nil {
			g.t.Fatal(err)
		}
		g.rec.take() // the test's own statement
	}
	kill()
	key := &admin.Key{TenantID: r.Event.TenantID, AggregateType: r.Event.AggregateType, AggregateID: r.Event.AggregateID}
	ids := []uuid.UUID{r.Event.ID}
	keys := admin.KeyFilter{Topic: r.Event.Topic, TenantID: r.Event.TenantID, Key: key, EventIDs: ids}
	letters := admin.EventFilter{Topic: r.Event.Topic, EventType: r.Event.EventType, TenantID: r.Event.TenantID, Key: key,
		EventIDs: ids, Since: time.Unix(0, 0), Until: time.Now().Add(time.Hour)}
	g.step("admin BlockedKeys", func() error { _, err := adm.BlockedKeys(ctx, keys); return err })
	g.step("blocked gauges", func() error {
		_, _, err := relay.BlockedSummary(ctx, db, sqlstore.New(adminTable, "", nil))
		return err
	})
	g.step("admin FindDeadLetters", func() error { _, err := adm.FindDeadLetters(ctx, letters); return err })
	g.step("admin FailureGroups", func() error { _, err := adm.FailureGroups(ctx, letters); return err })
	g.step("admin Event", func() error { _, err := adm.Event(ctx, r.Event.ID); return err })
	g.step("admin Relays", func() error { _, _, err := adm.Relays(ctx); return err })
	g.step("admin SkipKeys", func() error { return applied(adm.SkipKeys(ctx, keys, false)) })
	g.step("admin ReplayDeadLetters", func() error { return applied(adm.ReplayDeadLetters(ctx, letters, false)) })
	kill()
	g.step("admin DiscardDeadLetters", func() error { return applied(adm.DiscardDeadLetters(ctx, letters, false)) })
}

// renderAdminTenantStatements runs the statements of an Admin scoped to tenants (ForTenants) on
// a new dead event of one of them; the scoped Admin does not see an event of another tenant.
func renderAdminTenantStatements(g *goldenRun, db *sql.DB, d outbox.Dialect) {
	ctx := context.Background()
	all, err := admin.New(db, d, goldenTable)
	if err != nil {
		g.t.Fatal(err)
	}
	adm := all.ForTenants("ta", "tb")
	w, err := outbox.NewWriter(outbox.Config{Dialect: d, Table: goldenTable})
	if err != nil {
		g.t.Fatal(err)
	}
	e := outbox.Event{ID: uuid.NewSHA1(uuid.Nil, []byte("admin tenant")), Topic: "golden", AggregateType: "order",
		AggregateID: "k10", TenantID: "ta", EventType: "Happened", Payload: []byte("x")}
	if err := relay.InTx(ctx, db, func(tx *sql.Tx) error { return w.WriteTx(ctx, tx, e) }); err != nil {
		g.t.Fatal(err)
	}
	kill := func() {
		query := d.Rebind("UPDATE " + goldenTable + " SET status = 2, attempts = 3, last_error = 'golden dead' WHERE event_id = ?")
		if _, err := db.Exec(query, e.ID.String()); err != nil {
			g.t.Fatal(err)
		}
		g.rec.take() // the test's own statement
	}
	kill()
	if _, err := adm.Event(ctx, uuid.NewSHA1(uuid.Nil, []byte("admin"))); !errors.Is(err, admin.ErrEventNotFound) {
		g.t.Errorf("an Admin for tenants ta, tb shows an event of no tenant: %v", err)
	}
	g.rec.take()
	keys := admin.KeyFilter{Topic: e.Topic}
	letters := admin.EventFilter{Topic: e.Topic}
	g.step("admin (tenants) Status", func() error { _, err := adm.Status(ctx); return err })
	g.step("admin (tenants) BlockedKeys", func() error { _, err := adm.BlockedKeys(ctx, keys); return err })
	g.step("admin (tenants) FindDeadLetters", func() error { _, err := adm.FindDeadLetters(ctx, letters); return err })
	g.step("admin (tenants) Event", func() error { _, err := adm.Event(ctx, e.ID); return err })
	g.step("admin (tenants) SkipKeys", func() error { return applied(adm.SkipKeys(ctx, keys, false)) })
	g.step("admin (tenants) ReplayDeadLetters", func() error { return applied(adm.ReplayDeadLetters(ctx, letters, false)) })
	kill()
	g.step("admin (tenants) DiscardDeadLetters", func() error { return applied(adm.DiscardDeadLetters(ctx, letters, false)) })
}

// applied fails unless the action changed one row.
func applied(res admin.ActionResult, err error) error {
	if err == nil && res.Applied != 1 {
		err = fmt.Errorf("%s changed %d rows, want 1", res.Action, res.Applied)
	}
	return err
}
