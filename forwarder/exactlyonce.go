package forwarder

import (
	"fmt"
	"strings"

	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/forwarder/internal/exactlyonce"
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
const DefaultCheckpointTopic = bookkeeping.DefaultCheckpointTopic

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
//
// Its methods, beside message.Publisher's:
//
//	OpenUnit(ctx context.Context, unit, checkpointTopic string, slot int) ([]byte, error)
//	CommitUnit(ctx context.Context, unit string, topics []string, msgs []*message.Message, checkpoint []byte) ([]error, error)
//	CloseUnit(unit string)
//
// (The exactly-once delivery lives in an internal package, which declares the interface.)
type TransactionalPublisher = exactlyonce.Publisher

// ErrUnitCountMismatch is the error of an exactly-once relay configured with a unit count other
// than the one its lease group runs with.
var ErrUnitCountMismatch = exactlyonce.ErrUnitCountMismatch

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
