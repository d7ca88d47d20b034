package relay

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
	"github.com/outboxkit/outboxkit/outbox"
)

// The SQL of exactly-once delivery's bookkeeping in the database: the installation's identity
// (made by the migration) and, per transactional unit, the last checkpoint whose rows are
// acknowledged.

// InstallationID reads the identity the migration made for the outbox table.
func (s *Store) InstallationID(ctx context.Context, q Querier) (string, error) {
	return outbox.ReadInstallation(ctx, q, s.Table)
}

// CheckpointDigest identifies a checkpoint by its bytes, for the units table.
func CheckpointDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

// UnitMark is a unit's checkpoint whose rows an acknowledgement settles.
type UnitMark struct {
	Unit   int
	Name   string
	Digest string
	// settled is the mask of the unit's partitions whose rows the acknowledgement settled, when
	// its relay no longer owned them all (bit p for partition p); 0 when it owned the unit whole.
	Settled uint64
}

// CleanupMark is what the units table records of a unit: the digest of the last checkpoint whose
// rows are acknowledged, followed by "/" and settled as 16 hex digits when only some of the
// unit's partitions were (the relay that committed the transaction lost the others before its
// acknowledgement). It fits MySQL's VARCHAR(64) column.
func (m UnitMark) CleanupMark() string {
	if m.Settled == 0 {
		return m.Digest
	}
	return fmt.Sprintf("%s/%016x", m.Digest, m.Settled)
}

// ParseCleanupMark reads a unit's cleanup mark: the checkpoint digest and the mask of the
// partitions whose rows are settled (0: all of them). A mark it cannot read names no checkpoint.
func ParseCleanupMark(mark string) (digest string, settled uint64) {
	digest, mask, partial := strings.Cut(mark, "/")
	if !partial {
		return digest, 0
	}
	settled, err := strconv.ParseUint(mask, 16, 64)
	if err != nil || settled == 0 {
		return "", 0
	}
	return digest, settled
}

// CleanedDigest returns the cleanup mark of unit (cleanupMark), "" if none is recorded.
func (s *Store) CleanedDigest(ctx context.Context, q Querier, unit string) (string, error) {
	var digest string
	err := s.SQL().CleanedDigest(unit).QueryRow(ctx, q).Scan(&digest)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the cleanup mark of unit %s: %w", unit, err)
	}
	return digest, nil
}

// EnsureUnitRow creates the units table's row of unit if it is missing (at each opening of the
// unit), so that markCleaned only updates rows: an update by primary key locks just the row on
// every database, where an upsert takes gap locks on MySQL that could deadlock relays.
func (s *Store) EnsureUnitRow(ctx context.Context, q Querier, unit string) error {
	if _, err := s.SQL().EnsureUnitRow(unit).Exec(ctx, q); err != nil {
		return fmt.Errorf("create the cleanup mark of unit %s: %w", unit, err)
	}
	return nil
}

// MarkCleaned records, in the acknowledgement's transaction, the checkpoints whose rows it
// settles, in one statement.
func (s *Store) MarkCleaned(ctx context.Context, q Querier, marks []UnitMark) error {
	if len(marks) == 0 {
		return nil
	}
	rows := make([]sqlstore.UnitMark, len(marks))
	for i, m := range marks {
		rows[i] = sqlstore.UnitMark{Unit: m.Name, Mark: m.CleanupMark()}
	}
	if _, err := s.SQL().MarkCleaned(rows).Exec(ctx, q); err != nil {
		return fmt.Errorf("record the cleanup of %d transactional units: %w", len(marks), err)
	}
	return nil
}

// EventIDs returns the event id of each of the rows seqs that is in the table.
func (s *Store) EventIDs(ctx context.Context, q Querier, seqs []int64) (map[int64]RowEvent, error) {
	out := make(map[int64]RowEvent, len(seqs))
	if len(seqs) == 0 {
		return out, nil
	}
	rows, err := s.Planned(s.SQL().EventIDs(seqs)).Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read the event ids of %d rows: %w", len(seqs), err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var id string
		var partition int
		if err := rows.Scan(&seq, &id, &partition); err != nil {
			return nil, fmt.Errorf("read the event ids of %d rows: %w", len(seqs), err)
		}
		if parsed, err := uuid.Parse(id); err == nil {
			out[seq] = RowEvent{ID: parsed, Partition: partition}
		}
	}
	return out, rows.Err()
}

// RowEvent is the event a row holds and its partition.
type RowEvent struct {
	ID        uuid.UUID
	Partition int
}

// ApplyCheckpoint settles the rows of a unit's last checkpoint, found when opening the unit:
// published rows are deleted (or marked), dead ones marked dead. A row is touched only if it
// still holds the event the checkpoint names (its sequence number and its event id), and is not
// in a partition of settled (whose rows the acknowledgement of the checkpoint's transaction
// settled: a dead letter there may have been replayed since); a checkpoint of format 1 names no
// event ids and is applied by sequence number alone. It returns the rows of settled partitions
// it left alone, and how many rows of the checkpoint no longer held their event.
func (s *Store) ApplyCheckpoint(ctx context.Context, tx *sql.Tx, cp bookkeeping.Checkpoint, retain bool,
	settled uint64) (kept map[int64]bool, mismatched int, err error) {
	seqs := make([]int64, 0, len(cp.Rows)+len(cp.Dead))
	for _, r := range cp.Rows {
		seqs = append(seqs, r.Seq)
	}
	for _, d := range cp.Dead {
		seqs = append(seqs, d.Seq)
	}
	ids, err := s.EventIDs(ctx, tx, seqs)
	if err != nil {
		return nil, 0, err
	}
	kept = map[int64]bool{}
	holds := func(seq int64, eventID string) bool {
		row, ok := ids[seq]
		if !ok {
			return false // gone already: nothing to do
		}
		if settled&(1<<uint(row.Partition)) != 0 {
			kept[seq] = true
			return false
		}
		if eventID == "" {
			return true // format 1
		}
		if want, err := uuid.Parse(eventID); err != nil || want != row.ID {
			mismatched++
			return false
		}
		return true
	}
	published := make([]int64, 0, len(cp.Rows))
	for _, r := range cp.Rows {
		if holds(r.Seq, r.EventID) {
			published = append(published, r.Seq)
		}
	}
	if err := s.Ack(ctx, tx, published, retain); err != nil {
		return nil, mismatched, err
	}
	for _, d := range cp.Dead {
		if !holds(d.Seq, d.EventID) {
			continue
		}
		if err := s.Fail(ctx, tx, d.Seq, d.Attempts, time.Now(), true, d.Reason); err != nil {
			return nil, mismatched, err
		}
	}
	return kept, mismatched, nil
}

// RecordedUnits returns the unit count the units table records for the units named
// "<prefix>/uNN" (bookkeeping.RecordedUnits).
func (s *Store) RecordedUnits(ctx context.Context, q Querier, prefix string) (int, error) {
	return bookkeeping.RecordedUnits(ctx, q, s.SQL(), s.Table, prefix)
}

// UnitCount returns the unit count recorded for prefix, 0 when none is (bookkeeping.UnitCount).
func (s *Store) UnitCount(ctx context.Context, q Querier, prefix string) (int, error) {
	return bookkeeping.UnitCount(ctx, q, s.SQL(), s.Table, prefix)
}

// RecordUnitCount records count for prefix unless one is recorded already.
func (s *Store) RecordUnitCount(ctx context.Context, q Querier, prefix string, count int) error {
	if _, err := s.SQL().RecordUnitCount(bookkeeping.UnitCountRow(prefix), count).Exec(ctx, q); err != nil {
		return fmt.Errorf("record the transactional unit count of %s in %s: %w", prefix, s.Table.Units(), err)
	}
	return nil
}
