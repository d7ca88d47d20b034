package admin_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/internal/testsupport/forwardertest"
	"github.com/outboxkit/outboxkit/outbox"
)

// parkedFixture is an outbox with two dead keys failing alike, one retrying key and healthy
// keys, set up as the relay leaves them (forwardertest.Parked), and an Admin of it.
type parkedFixture struct {
	h   *harness
	adm *admin.Admin
	// dead and dead2 fail with the same cause (their errors differ in numbers and ids only).
	dead, dead2, retry []outbox.Event
}

const (
	tooLarge1 = forwardertest.TooLarge1
	refused   = forwardertest.Refused
)

func newParkedFixture(t *testing.T, dialect outbox.Dialect) *parkedFixture {
	t.Helper()
	h := newHarness(t, dialect, nil)
	p := forwardertest.WriteParked(t, h.db, dialect, h.writer, h.topic)
	adm, err := admin.New(h.db, dialect, h.writer.Table().Events())
	if err != nil {
		t.Fatal(err)
	}
	return &parkedFixture{h: h, adm: adm, dead: p.Dead, dead2: p.Dead2, retry: p.Retry}
}

// setRow records failures of an event as the relay does.
func (f *parkedFixture) setRow(e outbox.Event, status, attempts int, next time.Time, reason string) {
	f.h.t.Helper()
	forwardertest.SetRow(f.h.t, f.h.db, f.h.dialect, f.h.writer.Table().Events(), e, status, attempts, next, reason)
}

// row returns an event's status, attempts and whether it has a next attempt time (-1 when gone).
func (f *parkedFixture) row(e outbox.Event) (status, attempts int, hasNext bool) {
	f.h.t.Helper()
	var next any
	err := f.h.db.QueryRow(f.h.dialect.Rebind("SELECT status, attempts, next_attempt_at FROM "+f.h.writer.Table().Events()+
		" WHERE event_id = ?"), e.ID.String()).Scan(&status, &attempts, &next)
	if err != nil {
		return -1, -1, false
	}
	return status, attempts, next != nil
}

func keyOf(e outbox.Event) *admin.Key {
	return &admin.Key{TenantID: e.TenantID, AggregateType: e.AggregateType, AggregateID: e.AggregateID}
}

var adminDialects = []outbox.Dialect{outbox.Postgres, outbox.MySQL, outbox.SQLite}

func TestAdminBlockedKeysAndDeadLetterFilters(t *testing.T) {
	for _, dialect := range adminDialects {
		t.Run(string(dialect), func(t *testing.T) {
			ctx := context.Background()
			f := newParkedFixture(t, dialect)
			keys, err := f.adm.BlockedKeys(ctx, admin.KeyFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) != 3 {
				t.Fatalf("blocked keys: got %d (%+v), want dead, dead2 and retry", len(keys), keys)
			}
			want := []struct {
				id      string
				state   string
				waiting int64
			}{{"dead", admin.StateDead, 2}, {"dead2", admin.StateDead, 0}, {"retry", admin.StateRetrying, 1}}
			for i, w := range want {
				k := keys[i]
				if k.Key.AggregateID != w.id || k.State != w.state || k.Waiting != w.waiting {
					t.Errorf("key %d: got %s %s waiting %d, want %s %s waiting %d", i, k.Key, k.State, k.Waiting, w.id, w.state, w.waiting)
				}
			}
			if r := keys[2]; r.Head.EventID != f.retry[0].ID || r.Head.Attempts != 3 || r.NextAttempt.Before(time.Now()) ||
				r.Head.LastError != refused || r.BlockedSince.IsZero() || r.Key.Hash() != r.KeyHash {
				t.Errorf("retrying key: %+v", r)
			}
			if keys[0].Head.Fingerprint != keys[1].Head.Fingerprint || keys[0].Head.Fingerprint == keys[2].Head.Fingerprint {
				t.Errorf("fingerprints: %q %q %q: want the two too-large errors alike, the refused one apart",
					keys[0].Head.Fingerprint, keys[1].Head.Fingerprint, keys[2].Head.Fingerprint)
			}
			group := keys[0].Head.Fingerprint
			if got, _ := f.adm.BlockedKeys(ctx, admin.KeyFilter{Group: group}); len(got) != 2 {
				t.Errorf("blocked keys of group %s: got %d, want 2", group, len(got))
			}
			if got, _ := f.adm.BlockedKeys(ctx, admin.KeyFilter{Key: keyOf(f.retry[0])}); len(got) != 1 {
				t.Errorf("blocked keys of key retry: got %d, want 1", len(got))
			}
			if got, _ := f.adm.BlockedKeys(ctx, admin.KeyFilter{Topic: "other"}); len(got) != 0 {
				t.Errorf("blocked keys of topic other: got %d, want 0", len(got))
			}
			checkLetterFilters(t, f, group)
		})
	}
}

func checkLetterFilters(t *testing.T, f *parkedFixture, group string) {
	t.Helper()
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		filter admin.EventFilter
		want   int
	}{
		{"all", admin.EventFilter{}, 2},
		{"error", admin.EventFilter{ErrorContains: "TOO LARGE"}, 2},
		{"error miss", admin.EventFilter{ErrorContains: "refused"}, 0},
		{"group", admin.EventFilter{Group: group}, 2},
		{"key", admin.EventFilter{Key: keyOf(f.dead2[0])}, 1},
		{"topic", admin.EventFilter{Topic: f.h.topic}, 2},
		{"type", admin.EventFilter{EventType: "Other"}, 0},
		{"since", admin.EventFilter{Since: time.Now().Add(time.Hour)}, 0},
		{"until", admin.EventFilter{Until: time.Now().Add(time.Hour)}, 2},
		{"ids", admin.EventFilter{EventIDs: []uuid.UUID{f.dead[0].ID}}, 1},
		{"limit", admin.EventFilter{Limit: 1}, 1},
	} {
		got, err := f.adm.FindDeadLetters(ctx, c.filter)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got) != c.want {
			t.Errorf("dead letters, filter %s: got %d, want %d", c.name, len(got), c.want)
		}
	}
	groups, err := f.adm.FailureGroups(ctx, admin.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || groups[0].Fingerprint != group || groups[0].DeadLetters != 2 || groups[0].BlockedKeys != 2 ||
		groups[1].BlockedKeys != 1 || groups[1].DeadLetters != 0 {
		t.Errorf("failure groups: %+v", groups)
	}
	if groups[0].Normalised != "kafka: message <n> of event <uuid> is too large (<n> bytes, max <n>)" {
		t.Errorf("normalised error: %q", groups[0].Normalised)
	}
	d, err := f.adm.Event(ctx, f.dead[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Payload) != string(f.dead[0].Payload) || d.Headers["x-trace"] != "abc" || d.State != admin.StateDead ||
		d.LastError != tooLarge1 || d.Attempts != 5 {
		t.Errorf("event detail: %+v", d)
	}
	if _, err := f.adm.Event(ctx, f.h.event("none", 0).ID); !errors.Is(err, admin.ErrEventNotFound) {
		t.Errorf("unknown event: got %v, want ErrEventNotFound", err)
	}
}

func TestAdminActionsDryRunThenApply(t *testing.T) {
	for _, dialect := range adminDialects {
		t.Run(string(dialect), func(t *testing.T) {
			ctx := context.Background()
			f := newParkedFixture(t, dialect)
			// Skip the retrying key's head: a dry run names it and changes nothing.
			res, err := f.adm.SkipKeys(ctx, admin.KeyFilter{Key: keyOf(f.retry[0])}, true)
			if err != nil {
				t.Fatal(err)
			}
			if !res.DryRun || res.Applied != 0 || len(res.Events) != 1 || res.Events[0].EventID != f.retry[0].ID {
				t.Fatalf("skip dry run: %+v", res)
			}
			if st, _, _ := f.row(f.retry[0]); st != 0 {
				t.Fatalf("dry run changed the head: status %d", st)
			}
			if res, err = f.adm.SkipKeys(ctx, admin.KeyFilter{Key: keyOf(f.retry[0])}, false); err != nil || res.Applied != 1 {
				t.Fatalf("skip: %+v, %v", res, err)
			}
			if st, _, next := f.row(f.retry[0]); st != 3 || next {
				t.Errorf("skipped head: status %d, next attempt %v; want 3 (skipped) without a next attempt", st, next)
			}
			if st, att, next := f.row(f.retry[1]); st != 0 || att != 0 || !next {
				t.Errorf("event behind the skipped head: status %d attempts %d next %v; want pending, released with a next attempt", st, att, next)
			}
			keys, err := f.adm.BlockedKeys(ctx, admin.KeyFilter{})
			if err != nil || len(keys) != 2 {
				t.Fatalf("blocked keys after the skip: %d (%v), want 2", len(keys), err)
			}
			letters, _ := f.adm.FindDeadLetters(ctx, admin.EventFilter{Key: keyOf(f.retry[0])})
			if len(letters) != 1 || letters[0].State != admin.StateSkipped {
				t.Errorf("the skipped event is listed with the dead letters: %+v", letters)
			}
			group := keys[0].Head.Fingerprint
			// Replay by failure group: dry run, then for real.
			res, err = f.adm.ReplayDeadLetters(ctx, admin.EventFilter{Group: group}, true)
			if err != nil || len(res.Events) != 2 || res.Applied != 0 {
				t.Fatalf("replay dry run: %+v, %v", res, err)
			}
			if st, _, _ := f.row(f.dead[0]); st != 2 {
				t.Fatalf("dry run replayed: status %d", st)
			}
			// Discard by key first: the group's replay then touches the other one only.
			if res, err = f.adm.DiscardDeadLetters(ctx, admin.EventFilter{Key: keyOf(f.dead2[0])}, false); err != nil || res.Applied != 1 {
				t.Fatalf("discard by key: %+v, %v", res, err)
			}
			if st, _, _ := f.row(f.dead2[0]); st != -1 {
				t.Errorf("discarded event still in the table with status %d", st)
			}
			if res, err = f.adm.ReplayDeadLetters(ctx, admin.EventFilter{Group: group}, false); err != nil || res.Applied != 1 {
				t.Fatalf("replay by group: %+v, %v", res, err)
			}
			if st, att, _ := f.row(f.dead[0]); st != 0 || att != 0 {
				t.Errorf("replayed event: status %d attempts %d, want pending with fresh attempts", st, att)
			}
			// Skipped events are replayable too.
			if res, err = f.adm.ReplayDeadLetters(ctx, admin.EventFilter{EventIDs: []uuid.UUID{f.retry[0].ID}}, false); err != nil || res.Applied != 1 {
				t.Fatalf("replay of the skipped event: %+v, %v", res, err)
			}
			if keys, _ := f.adm.BlockedKeys(ctx, admin.KeyFilter{}); len(keys) != 0 {
				t.Errorf("blocked keys at the end: %+v", keys)
			}
		})
	}
}

// Admin.Relays lists a running relay with its 64 leased partitions and the group's summary.
func TestAdminRelays(t *testing.T) {
	for _, dialect := range adminDialects {
		t.Run(string(dialect), func(t *testing.T) {
			h := newHarness(t, dialect, testsupport.KafkaBrokers(t))
			cfg := h.config(h.publisher())
			cfg.RelayID = "relay-under-test"
			h.start(cfg)
			adm, err := admin.New(h.db, dialect, h.writer.Table().Events())
			if err != nil {
				t.Fatal(err)
			}
			var relays []admin.RelayStatus
			var leases []admin.LeaseSummary
			for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if relays, leases, err = adm.Relays(context.Background()); err != nil {
					t.Fatal(err)
				}
				if len(relays) == 1 && len(relays[0].Partitions) == outbox.Partitions {
					break
				}
			}
			if len(relays) != 1 || relays[0].Owner != "relay-under-test" || len(relays[0].Partitions) != outbox.Partitions ||
				len(relays[0].Expired) != 0 || relays[0].LastHeartbeat.IsZero() {
				t.Fatalf("relays: %+v", relays)
			}
			if len(leases) != 1 || leases[0].Owned != outbox.Partitions || leases[0].Free != 0 || leases[0].Expired != 0 {
				t.Errorf("lease groups: %+v", leases)
			}
		})
	}
}
