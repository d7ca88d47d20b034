package sqlstore

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// The adapters render, without a database, the statements the forwarder's golden test recorded
// against the real servers (forwarder/testdata/store_<dialect>.sql, table golden_outbox, lease
// group golden), and bind one argument per placeholder.

// goldenSections reads a golden file into its statements by step name.
func goldenSections(t *testing.T, d outbox.Dialect) map[string]map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "store_"+string(d)+".sql"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	var cur map[string]bool
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "-- "):
			cur = map[string]bool{}
			out[strings.TrimPrefix(line, "-- ")] = cur
		case line != "" && cur != nil:
			cur[strings.TrimSuffix(line, ";")] = true
		}
	}
	return out
}

// rendered is a statement and the golden step that sent it.
type rendered struct {
	step string
	q    Query
}

func seqPartitions(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// renderAll renders the statements of the golden run's steps for table.
func renderAll(table outbox.Table) []rendered {
	s := New(table, "golden", nil)
	tenants := New(table, "golden", []string{"a", "b"})
	const owner = "golden-relay"
	ttl := 10 * time.Second
	all := seqPartitions(outbox.Partitions)
	register, _ := s.RegisterRelay(owner, ttl)
	ids := []string{"6d2a4f4e-0000-5000-8000-000000000000"}
	return []rendered{
		{"ensureLeaseRows", s.EnsureLeaseRows()},
		{"heartbeat (acquire)", register}, {"heartbeat (acquire)", s.ForgetDeadRelays(ttl)},
		{"heartbeat (acquire)", s.CountRelays()}, {"heartbeat (acquire)", s.OwnedPartitions(owner)},
		{"heartbeat (acquire)", s.FreeLeases(outbox.Partitions)}, {"heartbeat (acquire)", s.LockLeases(all, true)},
		{"heartbeat (acquire)", s.Acquire(owner, ttl, all)},
		{"liveLeases", s.LiveLeases(owner, 0, 1)},
		{"claim", s.Claim(all, 100, 1<<20)},
		{"claim (tenants)", tenants.Claim(all, 100, 1<<20)},
		{"acknowledge (fence, ack, fail)", s.LockLeases(all, false)},
		{"acknowledge (fence, ack, fail)", s.Ack([]int64{1}, false)},
		{"acknowledge (fence, ack, fail)", s.Fail(3, 1, time.Now(), false, "golden failure")},
		{"ack (retain)", s.Ack([]int64{2}, true)},
		{"prune", s.Prune(time.Now(), 100)},
		{"stats", s.Stats()},
		{"renew", s.Renew(owner, ttl, all)},
		{"release", s.Release(owner, all[:2])},
		{"acquire", s.LockLeases(all[:2], true)}, {"acquire", s.Acquire(owner, ttl, all[:2])},
		{"lockLeases (skip locked)", s.LockLeases(all[:4], true)},
		{"cleanedDigest", s.CleanedDigest("golden/u00")},
		{"ensureUnitRow", s.EnsureUnitRow("golden/u00")},
		{"markCleaned", s.MarkCleaned([]UnitMark{{"golden/u01", "d1"}, {"golden/u00", "d0"}})},
		{"applyCheckpoint", s.EventIDs([]int64{1, 3})},
		{"admin Status", s.Status()},
		{"admin DeadLetters", s.DeadLetters(10)},
		{"admin Replay", s.Replay(ids)},
		{"admin Discard", s.MarkKeysOfDead(ids)}, {"admin Discard", s.Discard(ids)},
		{"releaseAll", s.Unregister(owner)},
	}
}

// renderAdminActions renders the statements of the Admin's filtered listings and actions, with
// the filters of the golden run (every field set; the event has no tenant).
func renderAdminActions(table outbox.Table) []rendered {
	s := New(table, "golden", nil)
	key := &FilterKey{Hash: 1, AggregateType: "order", AggregateID: "k9"}
	ids := []string{"6d2a4f4e-0000-5000-8000-000000000000"}
	keys := Filter{Topic: "golden", Key: key, EventIDs: ids}
	letters := Filter{Topic: "golden", EventType: "Happened", Key: key, EventIDs: ids, Since: time.Unix(0, 0), Until: time.Now()}
	one := []any{int64(1)}
	return []rendered{
		{"admin BlockedKeys", s.BlockedKeys(keys, -1, 500)},
		{"blocked gauges", s.BlockedSummary()},
		{"admin FindDeadLetters", s.Letters(letters, -1, 500)},
		{"admin Event", s.Event(ids[0])},
		{"admin Relays", s.Relays()}, {"admin Relays", s.Leases()},
		{"admin SkipKeys", s.SkipHeads(one)}, {"admin SkipKeys", s.ReleaseKeys(one)},
		{"admin ReplayDeadLetters", s.ReplayLetters(one)},
		{"admin DiscardDeadLetters", s.DiscardLetters(one)},
	}
}

// renderCDC renders the cdc source's statements (PostgreSQL).
func renderCDC(table outbox.Table) []rendered {
	c := New(table, "golden", nil).CDC()
	all := seqPartitions(outbox.Partitions)
	one := []int64{1}
	return []rendered{
		{"cdc admit", c.Admit(one, one, one)},
		{"cdc transactionsRunning", c.TransactionsRunning([]string{"1"})},
		{"cdc markRetry", c.MarkRetry("golden-relay", []int32{0}, one, one, one)},
		{"cdc markParkedUpTo", c.MarkParkedUpTo(100)},
		{"cdc maxSeq", c.MaxSeq()},
		{"cdc claimRetry", c.ClaimRetry(all, 100, 1<<20)},
		{"cdc claimUpTo", c.ClaimUpTo(all, 100, 1<<20, 100)},
		{"cdc otherLiveOwners", c.OtherLiveOwners("golden-relay")},
		{"cdc setSlotDrained", c.SetSlotDrained("golden_slot", true)},
		{"cdc slotDrained", c.SlotDrained("golden_slot")},
		{"cdc ackFenced", c.AckFenced("golden-relay", []int32{0}, one, one, false)},
		{"cdc strandedRows", c.StrandedRows(time.Minute)},
	}
}

var numbered = regexp.MustCompile(`\$(\d+)`)

// placeholders counts the statement's placeholders ($n numbered on PostgreSQL).
func placeholders(d outbox.Dialect, query string) int {
	if d != outbox.Postgres {
		return strings.Count(query, "?")
	}
	n := 0
	for _, m := range numbered.FindAllStringSubmatch(query, -1) {
		v, _ := strconv.Atoi(m[1])
		n = max(n, v)
	}
	return n
}

func TestStatementsRenderTheGolden(t *testing.T) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL, outbox.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			table, err := outbox.NewTable(d, "golden_outbox")
			if err != nil {
				t.Fatal(err)
			}
			golden := goldenSections(t, d)
			statements := append(renderAll(table), renderAdminActions(table)...)
			if d == outbox.Postgres {
				statements = append(statements, renderCDC(table)...)
			}
			for _, r := range statements {
				if !golden[r.step][r.q.SQL] {
					t.Errorf("%s: rendered a statement the golden step does not have:\n%s", r.step, r.q.SQL)
				}
				if n := placeholders(d, r.q.SQL); n != len(r.q.Args) {
					t.Errorf("%s: %d placeholders, %d arguments:\n%s", r.step, n, len(r.q.Args), r.q.SQL)
				}
			}
		})
	}
}

func TestStatementArguments(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	clock := func() time.Time { return at }
	mysql, _ := outbox.NewTable(outbox.MySQL, "t")
	sqlite, _ := outbox.NewTable(outbox.SQLite, "t")
	pg, _ := outbox.NewTable(outbox.Postgres, "t")

	// MariaDB's point lookups bind the keys as one sorted JSON array.
	if got := New(mysql, "g", nil).Ack([]int64{30, 4, 100}, false).Args; len(got) != 1 || got[0] != "[4,30,100]" {
		t.Errorf("mysql ack args = %v, want [[4,30,100]]", got)
	}
	if got := New(mysql, "g", nil).LockLeases([]int{7, 2}, false).Args; len(got) != 2 || got[0] != "[2,7]" || got[1] != "g" {
		t.Errorf("mysql lock args = %v", got)
	}
	// SQLite's clock offset is a strftime modifier, its times fixed-width text.
	if _, arg := (SQLite{}).Now(-10 * time.Second); arg != "-10.000000 seconds" {
		t.Errorf("sqlite now arg = %v", arg)
	}
	if got := New(sqlite, "g", nil).WithClock(clock).Ack([]int64{1}, true).Args; got[0] != "2026-01-02 03:04:05.000006" || got[1] != int64(1) {
		t.Errorf("sqlite retain args = %v", got)
	}
	// PostgreSQL's clock offset is in microseconds.
	if _, arg := (Postgres{}).Now(1500 * time.Millisecond); arg != int64(1_500_000) {
		t.Errorf("postgres now arg = %v", arg)
	}
	// A failure binds its status, attempts, time, reason and row, in that order.
	got := New(pg, "g", nil).Fail(9, 3, at, true, "boom").Args
	if len(got) != 5 || got[0] != StatusDead || got[1] != 3 || got[2] != at || got[3] != "boom" || got[4] != int64(9) {
		t.Errorf("fail args = %v", got)
	}
	// The tenant filter binds each tenant after the parked-keys time.
	claim := New(pg, "g", []string{"a", "b"}).WithClock(clock).Claim([]int{5}, 10, 99).Args
	if want := []any{5, 5, at, "a", "b", 10, int64(99)}; !equalArgs(claim, want) {
		t.Errorf("claim args = %v, want %v", claim, want)
	}
	// MarkCleaned updates the units in name order.
	mark := New(pg, "g", nil).WithClock(clock).MarkCleaned([]UnitMark{{"u2", "b"}, {"u1", "a"}}).Args
	if want := []any{"u1", "a", "u2", "b", at, "u1", "u2"}; !equalArgs(mark, want) {
		t.Errorf("mark args = %v, want %v", mark, want)
	}
}

func equalArgs(got, want []any) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func TestForEveryDialect(t *testing.T) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL, outbox.SQLite} {
		a, err := For(d)
		if err != nil || a.Name() != d {
			t.Errorf("For(%s) = %v, %v", d, a, err)
		}
	}
	if _, err := For("oracle"); err == nil {
		t.Error("For accepted an unknown dialect")
	}
	pg, _ := outbox.NewTable(outbox.Postgres, "t")
	my, _ := outbox.NewTable(outbox.MySQL, "t")
	if !New(pg, "g", nil).Replicates() || New(my, "g", nil).Replicates() {
		t.Error("only PostgreSQL replicates")
	}
	lite, _ := outbox.NewTable(outbox.SQLite, "t")
	if !New(pg, "g", nil).AcksInOneStatement() || New(my, "g", nil).AcksInOneStatement() || New(lite, "g", nil).AcksInOneStatement() {
		t.Error("only PostgreSQL acknowledges in one statement")
	}
}

func TestListenQuotesTheChannel(t *testing.T) {
	table, err := outbox.NewTable(outbox.Postgres, "App.Outbox")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Listen(table), `LISTEN "outboxkit_App_Outbox"`; got != want {
		t.Errorf("Listen = %s, want %s", got, want)
	}
}
