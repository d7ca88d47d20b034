package bookkeeping

import (
	"encoding/json"
	"fmt"
	"time"
)

// Checkpoint is what a transactional unit writes in each transaction beside its events: the
// rows the transaction holds, so that whoever opens the unit next can finish their cleanup
// (delete or mark them, mark the dead-lettered ones dead) before publishing anything. Rows are
// listed one by one: sequence order is not commit order, so a high-water mark could skip a row
// committed late. Each row is named by its sequence number and its event id, and the checkpoint
// by the installation that wrote it: a checkpoint is applied only to its own installation's
// table, and only to rows that still hold the event it names.
type Checkpoint struct {
	Version int `json:"v"`
	// Installation is the identity of the outbox table (its installation table); format 2.
	Installation string    `json:"installation,omitempty"`
	Unit         string    `json:"unit"`
	Relay        string    `json:"relay"`
	Txn          int64     `json:"txn"`
	Time         time.Time `json:"time"`
	// Published lists the published rows in format 1 (sequence numbers only);
	// DecodeCheckpoint moves them to Rows.
	Published []int64   `json:"published,omitempty"`
	Rows      []RowRef  `json:"rows,omitempty"`
	Dead      []DeadRow `json:"dead,omitempty"`
	// WAL is the position a checkpoint of the wal source's stream covers (its unit's only).
	WAL *WALPosition `json:"wal,omitempty"`
}

// WALPosition is the position of the wal source's stream that a checkpoint of its unit covers:
// every event of a transaction that committed at or before Commit (a commit LSN) is published
// by this or an earlier transaction of the unit, or parked in the table; End (the end of that
// commit record) is where the slot may be confirmed.
type WALPosition struct {
	Slot   string `json:"slot"`
	Commit uint64 `json:"commit"`
	End    uint64 `json:"end"`
}

// RowRef names a published row of a checkpoint.
type RowRef struct {
	Seq     int64  `json:"s"`
	EventID string `json:"e,omitempty"` // "" in format 1
}

// DeadRow is a row whose dead letter a transaction holds.
type DeadRow struct {
	Seq      int64  `json:"seq"`
	EventID  string `json:"event_id,omitempty"` // "" in format 1
	Attempts int    `json:"attempts"`
	Reason   string `json:"reason"`
}

// CheckpointVersion is the checkpoint format written. DecodeCheckpoint also reads format 1,
// written before checkpoints carried the installation and the event ids.
const CheckpointVersion = 2

// DecodeCheckpoint reads the checkpoint of unit, either format; an error names the unit.
func DecodeCheckpoint(unit string, data []byte) (Checkpoint, error) {
	var cp Checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return cp, fmt.Errorf("checkpoint of unit %q is not readable (%d bytes): %w", unit, len(data), err)
	}
	switch cp.Version {
	case 1:
		for _, seq := range cp.Published {
			cp.Rows = append(cp.Rows, RowRef{Seq: seq})
		}
		cp.Published = nil
	case CheckpointVersion:
		if cp.Installation == "" {
			return cp, fmt.Errorf("checkpoint of unit %q (version %d) names no installation", unit, cp.Version)
		}
	default:
		return cp, fmt.Errorf("checkpoint of unit %q has version %d; this forwarder reads versions 1 and %d", unit, cp.Version, CheckpointVersion)
	}
	return cp, nil
}

// Seqs returns the sequence numbers of the checkpoint's rows, published and dead.
func (cp Checkpoint) Seqs() map[int64]bool {
	rows := make(map[int64]bool, len(cp.Rows)+len(cp.Dead))
	for _, r := range cp.Rows {
		rows[r.Seq] = true
	}
	for _, d := range cp.Dead {
		rows[d.Seq] = true
	}
	return rows
}
