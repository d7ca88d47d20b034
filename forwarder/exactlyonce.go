package forwarder

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/outbox"
)

// Delivery is the forwarder's delivery guarantee.
type Delivery string

const (
	// AtLeastOnce publishes each event at least once: a crash or a lease takeover between the
	// broker's acknowledgement and the row's deletion publishes the event again. The default.
	AtLeastOnce Delivery = "at_least_once"
	// ExactlyOnce publishes the events of a partition and a checkpoint naming their rows in one
	// broker transaction, so that a read_committed consumer sees each event once. It needs a
	// publisher that implements [TransactionalPublisher] (brokers/kafka). See
	// docs/exactly-once.md.
	ExactlyOnce Delivery = "exactly_once"
)

// DefaultCheckpointTopic is the default Config.CheckpointTopic.
const DefaultCheckpointTopic = "outboxkit.checkpoints"

// TransactionalPublisher is implemented by publishers that publish messages and a checkpoint in
// one broker transaction, with zombie fencing (brokers/kafka.Publisher). With
// Config.Delivery ExactlyOnce, the forwarder runs one unit per partition it leases.
//
// OpenUnit starts the session of unit (a stable name; for Kafka, the transactional.id). Opening
// must fence every earlier session of the same unit, in any process: its open transaction is
// aborted and its later commits fail. It returns the last checkpoint committed by any session
// of unit on checkpointTopic (nil if none), read after the fencing, so that no commit of an
// earlier session can follow it. slot (0 to outbox.Partitions-1) may place the unit's
// checkpoints.
//
// CommitUnit publishes msgs[i] to topics[i] and the checkpoint in one transaction. It returns
// len(msgs) errors and a transaction error: nil when committed; errs[i] non-nil when msgs[i]
// failed and nothing was committed; only the transaction error when the outcome is unknown or
// the session was fenced. After any error the session is closed and the unit must be opened
// again (which resolves an unknown outcome through the checkpoint). Failures must be gapless
// per key, as for [OutcomePublisher].
//
// CloseUnit closes the session of unit, aborting its open transaction, if any.
type TransactionalPublisher interface {
	message.Publisher
	OpenUnit(ctx context.Context, unit, checkpointTopic string, slot int) ([]byte, error)
	CommitUnit(ctx context.Context, unit string, topics []string, msgs []*message.Message, checkpoint []byte) ([]error, error)
	CloseUnit(unit string)
}

// checkpoint is what a unit writes in each transaction beside its events: the rows the
// transaction holds, so that whoever opens the unit next can finish their cleanup (delete or
// mark them, mark the dead-lettered ones dead) before publishing anything. Rows are listed one by
// one: sequence order is not commit order, so a high-water mark could skip a row committed late.
// Each row is named by its sequence number and its event id, and the checkpoint by the
// installation that wrote it: a checkpoint is applied only to its own installation's table,
// and only to rows that still hold the event it names.
type checkpoint struct {
	Version int `json:"v"`
	// Installation is the identity of the outbox table (its installation table); format 2.
	Installation string    `json:"installation,omitempty"`
	Unit         string    `json:"unit"`
	Relay        string    `json:"relay"`
	Txn          int64     `json:"txn"`
	Time         time.Time `json:"time"`
	// Published lists the published rows in format 1 (sequence numbers only);
	// decodeCheckpoint moves them to Rows.
	Published []int64   `json:"published,omitempty"`
	Rows      []rowRef  `json:"rows,omitempty"`
	Dead      []deadRow `json:"dead,omitempty"`
}

// rowRef names a published row of a checkpoint.
type rowRef struct {
	Seq     int64  `json:"s"`
	EventID string `json:"e,omitempty"` // "" in format 1
}

// deadRow is a row whose dead letter a transaction holds.
type deadRow struct {
	Seq      int64  `json:"seq"`
	EventID  string `json:"event_id,omitempty"` // "" in format 1
	Attempts int    `json:"attempts"`
	Reason   string `json:"reason"`
}

// checkpointVersion is the checkpoint format written. decodeCheckpoint also reads format 1,
// written before checkpoints carried the installation and the event ids.
const checkpointVersion = 2

func decodeCheckpoint(unit string, data []byte) (checkpoint, error) {
	var cp checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return cp, fmt.Errorf("checkpoint of unit %q is not readable (%d bytes): %w", unit, len(data), err)
	}
	switch cp.Version {
	case 1:
		for _, seq := range cp.Published {
			cp.Rows = append(cp.Rows, rowRef{Seq: seq})
		}
		cp.Published = nil
	case checkpointVersion:
		if cp.Installation == "" {
			return cp, fmt.Errorf("checkpoint of unit %q (version %d) names no installation", unit, cp.Version)
		}
	default:
		return cp, fmt.Errorf("checkpoint of unit %q has version %d; this forwarder reads versions 1 and %d", unit, cp.Version, checkpointVersion)
	}
	return cp, nil
}

// rows returns the sequence numbers of the checkpoint's rows.
func (cp checkpoint) rows() map[int64]bool {
	rows := make(map[int64]bool, len(cp.Rows)+len(cp.Dead))
	for _, r := range cp.Rows {
		rows[r.Seq] = true
	}
	for _, d := range cp.Dead {
		rows[d.Seq] = true
	}
	return rows
}

// unitName is the name of a transactional unit (its Kafka transactional.id):
// Config.TransactionalIDPrefix and the unit number.
func (f *Forwarder) unitName(unit int) string {
	return fmt.Sprintf("%s/u%02d", f.cfg.TransactionalIDPrefix, unit)
}

// resolveInstallation reads the table's installation identity and, unless the configuration
// names one, derives the units' prefix from it.
func (f *Forwarder) resolveInstallation(ctx context.Context) error {
	id, err := f.store.installationID(ctx, f.cfg.DB)
	if err != nil {
		return err
	}
	f.installation = id
	if f.cfg.TransactionalIDPrefix == "" {
		f.cfg.TransactionalIDPrefix = defaultTransactionalIDPrefix(id, f.store.table.Events(), f.cfg.LeaseGroup)
	}
	// The units table keys its rows by unit name (VARCHAR(191) on MySQL, which would cut a longer
	// one, and the cleanup marks would then never match).
	if name := f.unitName(f.cfg.TransactionalUnits - 1); len(name) > maxUnitName {
		return fmt.Errorf("forwarder: transactional unit name %q is %d bytes, over the limit of %d: "+
			"set a shorter TransactionalIDPrefix (transactional_id_prefix) or lease group", name, len(name), maxUnitName)
	}
	return nil
}

// maxUnitName bounds a transactional unit's name: the key of the units table.
const maxUnitName = 191

// defaultTransactionalIDPrefix names the units of one installation, table and lease group.
func defaultTransactionalIDPrefix(installation, table, group string) string {
	return "outboxkit/" + installation + "/" + table + "/" + group
}

// validateDelivery checks the exactly-once settings of c.
func (c Config) validateDelivery() []error {
	var errs []error
	switch c.Delivery {
	case "", AtLeastOnce:
	case ExactlyOnce:
		if _, ok := c.Publisher.(TransactionalPublisher); c.Publisher != nil && !ok {
			errs = append(errs, fmt.Errorf("Delivery %q needs a publisher with transactions (brokers/kafka); %T has none "+
				"(Pulsar: see docs/exactly-once.md)", c.Delivery, c.Publisher))
		}
	default:
		errs = append(errs, fmt.Errorf("Delivery %q is not %q or %q", c.Delivery, AtLeastOnce, ExactlyOnce))
	}
	if c.TransactionalIDPrefix != "" && strings.TrimSpace(c.TransactionalIDPrefix) == "" && c.Delivery == ExactlyOnce {
		errs = append(errs, fmt.Errorf("TransactionalIDPrefix %q must not be blank", c.TransactionalIDPrefix))
	}
	if c.Delivery == ExactlyOnce {
		if err := outbox.ValidateTopic(c.CheckpointTopic); err != nil {
			errs = append(errs, fmt.Errorf("CheckpointTopic: %w", err))
		}
		u := c.TransactionalUnits
		if u <= 0 || u > outbox.Partitions || outbox.Partitions%u != 0 || (c.Workers > 0 && u%c.Workers != 0) {
			errs = append(errs, fmt.Errorf("TransactionalUnits %d must divide the %d partitions and be a multiple of Workers %d",
				u, outbox.Partitions, c.Workers))
		}
	}
	return errs
}
