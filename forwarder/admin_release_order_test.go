package forwarder

import (
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestReleasedKeyKeepsCommitOrderOnTheRetryPath: skipping or discarding a dead head under the cdc source keeps the key's order: the key's
// next event, which the stream already left to the retry path with its commit position, is
// still claimed before a later one that was committed but not yet read from the stream when
// the operator acted (the action gives that one a next attempt time, without a commit
// position).
func TestReleasedKeyKeepsCommitOrderOnTheRetryPath(t *testing.T) {
	for _, action := range []string{"skip", "discard", "discard by id"} {
		t.Run(action, func(t *testing.T) {
			fx, recs := newDeadHeadFixture(t)
			head, streamed, unread := recs[0], recs[1], recs[2]
			// The stream read the key's next event and, its key being dead, left it to the retry
			// path with its commit position; the last one is committed but not yet read.
			fx.markStreamed(streamed)
			var err error
			switch action {
			case "skip":
				_, err = fx.adm.SkipKeys(fx.ctx, admin.KeyFilter{}, false)
			case "discard":
				_, err = fx.adm.DiscardDeadLetters(fx.ctx, admin.EventFilter{}, false)
			default:
				_, err = fx.adm.Discard(fx.ctx, head.Event.ID)
			}
			if err != nil {
				t.Fatal(err)
			}
			seqs := fx.retrySeqs()
			if len(seqs) != 2 || seqs[0] != streamed.Seq || seqs[1] != unread.Seq {
				t.Fatalf("the retry path claims the key's rows as seq %v, want [%d %d] (commit order)", seqs, streamed.Seq, unread.Seq)
			}
		})
	}
}

// TestReleasedRowTheDrainLeftStaysFirst: a row of the key that no stream will read (the table
// drain left it behind the dead head) keeps sorting before the rows the stream marked, when an
// operator's skip hands it to the retry path.
func TestReleasedRowTheDrainLeftStaysFirst(t *testing.T) {
	fx, recs := newDeadHeadFixture(t)
	left, streamed := recs[1], recs[2]
	fx.markStreamed(streamed)
	if _, err := fx.adm.SkipKeys(fx.ctx, admin.KeyFilter{}, false); err != nil {
		t.Fatal(err)
	}
	if seqs := fx.retrySeqs(); len(seqs) != 2 || seqs[0] != left.Seq || seqs[1] != streamed.Seq {
		t.Fatalf("the retry path claims the key's rows as seq %v, want [%d %d] (the drain's row first)", seqs, left.Seq, streamed.Seq)
	}
}

// newDeadHeadFixture returns a PostgreSQL store fixture whose relay A owns every partition and
// claimed the three events of key k (recs), the first of them then dead after 10 attempts.
func newDeadHeadFixture(t *testing.T) (*storeFixture, []relay.Record) {
	t.Helper()
	fx := newStoreFixture(t, outbox.Postgres)
	if err := fx.store.EnsureLeaseRows(fx.ctx, fx.db); err != nil {
		t.Fatal(err)
	}
	fx.heartbeat("A", 10*time.Second)
	fx.write("k", 1, 2, 3)
	recs := fx.claim(10, 1<<20)
	if len(recs) != 3 {
		t.Fatalf("claimed %d rows, want 3", len(recs))
	}
	if _, err := fx.db.Exec("UPDATE "+fx.store.Table.Events()+" SET status = 2, attempts = 10, last_error = 'boom' WHERE seq = $1",
		recs[0].Seq); err != nil {
		t.Fatal(err)
	}
	return fx, recs
}

// markStreamed leaves r to the retry path as relay A's stream does with a row of a dead key:
// with its commit position.
func (fx *storeFixture) markStreamed(r relay.Record) {
	fx.t.Helper()
	r.CommitLSN = 1 << 40
	if n, _, err := fx.store.MarkRetry(fx.ctx, fx.db, "A", fx.leases("A"), []relay.Record{r}); err != nil || n != 1 {
		fx.t.Fatalf("mark the streamed row: %d, %v", n, err)
	}
}

// retrySeqs claims the rows of the retry path and returns their seqs in claim order.
func (fx *storeFixture) retrySeqs() []int64 {
	fx.t.Helper()
	got, err := fx.store.ClaimRetry(fx.ctx, fx.db, allPartitions(), 10, 1<<20)
	if err != nil {
		fx.t.Fatal(err)
	}
	var seqs []int64
	for _, r := range got {
		seqs = append(seqs, r.Seq)
	}
	return seqs
}
