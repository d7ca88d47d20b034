package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
)

// The cdc source's use of the store (PostgreSQL only; the statements are sqlstore.CDC's). A pending row with a next attempt time marks
// its key as left to the retry path: a failed event, a replayed dead letter, or a later event of
// such a key that the stream passed on. The stream publishes no event of a marked or dead key;
// the retry path claims the marked rows in sequence order. The <table>_retry_keys index
// (migration 3) finds them.

// Admit returns, of the records, the seqs of those still pending and unmarked whose key is
// neither marked nor dead (admitted: the stream may publish them), and the seqs of every row that
// still exists (found). A row not found was handled already (deleted by the drain, or a replay
// after a restart), or its transaction, decoded from the WAL, is not visible yet (see
// awaitVisible). One statement per batch.
func (s *Store) Admit(ctx context.Context, q Querier, records []Record) (admitted, found map[int64]bool, err error) {
	seqs := make([]int64, len(records))
	keys := make([]int64, 0, len(records))
	parts := make([]int64, 0, len(records))
	seenKey, seenPart := map[int64]bool{}, map[int]bool{}
	for i, r := range records {
		seqs[i] = r.Seq
		if !seenKey[r.KeyHash] {
			seenKey[r.KeyHash] = true
			keys = append(keys, r.KeyHash)
		}
		if !seenPart[r.Partition] {
			seenPart[r.Partition] = true
			parts = append(parts, int64(r.Partition))
		}
	}
	rows, err := s.SQL().CDC().Admit(seqs, parts, keys).InGeneration(s.Plans.Observe(len(records), BatchBytes(records))).Query(ctx, q)
	if err != nil {
		return nil, nil, fmt.Errorf("cdc: read which of %d streamed rows are pending: %w", len(records), err)
	}
	defer rows.Close()
	admitted, found = make(map[int64]bool, len(records)), make(map[int64]bool, len(records))
	for rows.Next() {
		var seq int64
		var ok bool
		if err := rows.Scan(&seq, &ok); err != nil {
			return nil, nil, fmt.Errorf("cdc: read pending rows: %w", err)
		}
		found[seq] = true
		if ok {
			admitted[seq] = true
		}
	}
	return admitted, found, rows.Err()
}

// TransactionsRunning reports whether any of the transactions still holds its transaction id
// lock. PostgreSQL writes (and decodes) a commit before the transaction becomes visible to
// other sessions, and releases the lock only after that: once it is gone, the rows are visible.
func (s *Store) TransactionsRunning(ctx context.Context, q Querier, xids []string) (bool, error) {
	var running bool
	err := s.SQL().CDC().TransactionsRunning(xids).QueryRow(ctx, q).Scan(&running)
	if err != nil {
		return false, fmt.Errorf("cdc: check whether transactions %v have ended: %w", xids, err)
	}
	return running, nil
}

// MarkRetry gives the still pending, unmarked rows among records a next attempt time (now),
// which leaves them, and their keys, to the retry path, and records their commit positions (the
// order the retry path claims them in). The marks are fenced like ackFenced, in the same one
// statement: only rows of partitions owner still holds with the epochs of leases are marked (a
// relay that lost its leases must not park rows its successor may be publishing: the successor's
// retry path would publish them again). It returns how many rows it marked and the partitions it
// found owned.
func (s *Store) MarkRetry(ctx context.Context, q Querier, owner string, leases []Lease, records []Record) (int64, map[int]bool, error) {
	if len(records) == 0 {
		return 0, map[int]bool{}, nil
	}
	seqs, lsns := make([]int64, len(records)), make([]int64, len(records))
	for i, r := range records {
		seqs[i], lsns[i] = r.Seq, r.CommitLSN
	}
	// The lease rows are locked in partition order before any event row, as everywhere else.
	parts, epochs := LeaseArrays(leases)
	rows, err := s.Planned(s.SQL().CDC().MarkRetry(owner, parts, epochs, seqs, lsns)).Query(ctx, q)
	if err != nil {
		return 0, nil, fmt.Errorf("cdc: leave %d rows to the retry path: %w", len(records), err)
	}
	defer rows.Close()
	owned := make(map[int]bool, len(leases))
	var n int64
	for rows.Next() {
		var p int
		if err := rows.Scan(&p, &n); err != nil {
			return 0, nil, fmt.Errorf("cdc: leave %d rows to the retry path: %w", len(records), err)
		}
		owned[p] = true
	}
	if err := rows.Err(); err != nil {
		return 0, nil, fmt.Errorf("cdc: leave %d rows to the retry path: %w", len(records), err)
	}
	return n, owned, nil
}

// MarkParkedUpTo marks the unmarked pending rows up to seq horizon of keys that are marked or
// dead: the later events of parked keys, which the polling source kept behind their key's
// failure without marking them. Run before a fresh slot's drain.
func (s *Store) MarkParkedUpTo(ctx context.Context, q Querier, horizon int64) (int64, error) {
	res, err := s.SQL().CDC().MarkParkedUpTo(horizon).Exec(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("cdc: mark the later events of parked keys up to seq %d: %w", horizon, err)
	}
	return res.RowsAffected()
}

// MaxSeq returns the highest seq in the table (0 when empty).
func (s *Store) MaxSeq(ctx context.Context, q Querier) (int64, error) {
	var seq int64
	if err := s.SQL().CDC().MaxSeq().QueryRow(ctx, q).Scan(&seq); err != nil {
		return 0, fmt.Errorf("cdc: read the highest seq: %w", err)
	}
	return seq, nil
}

// ClaimRetry claims the marked rows that are due, in the order of their commit positions (the
// rows marked without one first), then seq: commit order per key, also without key locks
// (claim's rules otherwise).
func (s *Store) ClaimRetry(ctx context.Context, q Querier, partitions []int, limit int, maxBytes int64) ([]Record, error) {
	return s.CDCClaim(ctx, q, s.SQL().CDC().ClaimRetry(partitions, limit, maxBytes))
}

// ClaimUpTo claims pending rows up to seq horizon (the drain of a fresh slot).
func (s *Store) ClaimUpTo(ctx context.Context, q Querier, partitions []int, limit int, maxBytes int64, horizon int64) ([]Record, error) {
	return s.CDCClaim(ctx, q, s.SQL().CDC().ClaimUpTo(partitions, limit, maxBytes, horizon))
}

func (s *Store) CDCClaim(ctx context.Context, q Querier, claim sqlstore.Query) ([]Record, error) {
	records, err := s.ClaimWith(ctx, q, claim)
	if err != nil {
		return nil, fmt.Errorf("cdc: claim rows: %w", err)
	}
	return records, nil
}

// OtherLiveOwners counts the unexpired leases of the group held by relays other than owner.
func (s *Store) OtherLiveOwners(ctx context.Context, q Querier, owner string) (int, error) {
	var n int
	err := s.SQL().CDC().OtherLiveOwners(owner).QueryRow(ctx, q).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("cdc: count other relays' live leases: %w", err)
	}
	return n, nil
}

// SlotDrained reports whether the rows committed before the slot existed have been drained
// (bookkeeping.SlotDrained).
func (s *Store) SlotDrained(ctx context.Context, q Querier, slot string) (bool, error) {
	return bookkeeping.SlotDrained(ctx, q, s.SQL().CDC(), slot)
}

// SetSlotDrained records (drained true) or clears (before the slot is created) the drain state.
func (s *Store) SetSlotDrained(ctx context.Context, q Querier, slot string, drained bool) error {
	if _, err := s.SQL().CDC().SetSlotDrained(slot, drained).Exec(ctx, q); err != nil {
		return fmt.Errorf("cdc: record the drain state of slot %s: %w", slot, err)
	}
	return nil
}

// AckFenced is acknowledge's transaction for a part whose every record was acknowledged by the
// broker, as one statement: it locks the lease rows of the partitions still held with the
// epochs read (in partition order, FOR UPDATE, as fence does; under READ COMMITTED a row
// updated meanwhile is checked again in its latest version), deletes (or, with retain, marks
// published) the rows of those partitions among seqs, and returns the partitions it found
// owned. It replaces BEGIN, the idle timeout, the fence, the delete and COMMIT: five round
// trips, one. No transaction is left open between statements, so none can outlive a pause of
// the relay (what inLeaseTx's idle timeout is for).
func (s *Store) AckFenced(ctx context.Context, q Querier, owner string, leases []Lease, seqs []int64, retain bool) (map[int]bool, error) {
	parts, epochs := LeaseArrays(leases)
	rows, err := s.Planned(s.SQL().CDC().AckFenced(owner, parts, epochs, seqs, retain)).Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("ack %d rows: %w", len(seqs), err)
	}
	defer rows.Close()
	owned := make(map[int]bool, len(leases))
	for rows.Next() {
		var p int
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("ack %d rows: %w", len(seqs), err)
		}
		owned[p] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ack %d rows: %w", len(seqs), err)
	}
	return owned, nil
}

// LeaseArrays returns the partitions and epochs of leases as the arrays the fenced cdc
// statements bind.
func LeaseArrays(leases []Lease) ([]int32, []int64) {
	parts := make([]int32, len(leases))
	epochs := make([]int64, len(leases))
	for i, l := range leases {
		parts[i], epochs[i] = int32(l.Partition), l.Epoch
	}
	return parts, epochs
}

// StrandedRows counts the pending rows of the relay's tenants that are not on the retry path
// and older than age, and returns the age of the oldest (bookkeeping.StrandedRows).
func (s *Store) StrandedRows(ctx context.Context, q Querier, age time.Duration) (int64, time.Duration, error) {
	return bookkeeping.StrandedRows(ctx, q, s.SQL().CDC(), age)
}
