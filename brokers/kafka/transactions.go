package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// ErrRefusedInTransaction wraps the broker's refusal of a record produced inside a transaction.
// Retriable reports true for it, whatever the broker said: a broker refuses a whole batch for
// one bad record, and a record of a transaction cannot be sent once more alone to find out
// whose fault it was (that would publish it outside the transaction), so the refusal may be
// another record's. The forwarder retries such a record with backoff and dead-letters it after
// its last attempt.
var ErrRefusedInTransaction = errors.New("kafka: refused inside a transaction (retried: the refusal may be another record's)")

// ErrUnitNotOpen is returned by CommitUnit for a unit that OpenUnit did not open, or whose
// session was closed by an earlier failure.
var ErrUnitNotOpen = errors.New("kafka: transactional unit not open")

// transactionTimeout is the transaction.timeout.ms of every unit's producer: the broker aborts a
// transaction left open longer (a relay paused inside one, with nobody taking its unit over).
const transactionTimeout = 60 * time.Second

// retryMetadataMinAge is the MetadataMinAge of every unit's producer. franz-go resends a refused
// produce batch (a partition's leader moved, say) only after a metadata refresh, and refreshes at
// most once per MetadataMinAge (5 s by default): a unit holds its transaction open, and its
// partitions wait, for as long. With a short minimum age the resend waits for one metadata round
// trip. The cost is more metadata requests while a partition has no leader (about one per
// MetadataMinAge and unit), which is why it is not shorter.
const retryMetadataMinAge = 20 * time.Millisecond

// concurrentTransactionsBackoff is how long a unit's producer waits before asking again to add a
// partition to its transaction while the coordinator still finishes the unit's previous one
// (and before retrying InitProducerId and EndTxn on the same answer; franz-go lengthens it after
// a second of such answers). Shorter polls sooner but loads the coordinator that is writing
// those very markers.
const concurrentTransactionsBackoff = 5 * time.Millisecond

// explicitPartitionAdds returns the request versions of a unit's producer: those of franz-go,
// but at most the versions before transaction.version 2 (KIP-890 part 2) for Produce, EndTxn
// and TxnOffsetCommit, so that the producer adds each partition to its transaction with an
// AddPartitionsToTxn request of its own instead of with the partition's first record.
//
// Either way a unit's next transaction cannot begin on a partition until the coordinator has
// written the markers of its previous one. With version 2 the broker refuses the first record
// with CONCURRENT_TRANSACTIONS and franz-go resends it only after a metadata refresh; with an
// explicit AddPartitionsToTxn the refusal is retried after concurrentTransactionsBackoff, so the
// transaction starts sooner after the markers are written. Fencing is Kafka's producer fencing
// in both (KIP-98): opening a unit bumps its producer epoch, and the brokers verify that a
// transactional write belongs to an ongoing transaction (KIP-890 part 1, on by default since
// Kafka 3.6). docs/exactly-once.md compares the two on a three-broker cluster.
func explicitPartitionAdds() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	v.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
	return v
}

// units holds the transactional sessions of a Publisher, one per unit.
type units struct {
	mu       sync.Mutex
	sessions map[string]*unitSession
	topics   map[string]int32 // checkpoint topic -> partitions, once ensured
	// beforeCommit, set by tests only, runs after a transaction's records are acknowledged and
	// before its commit: the crash point "inside an open transaction".
	beforeCommit func(unit string)
}

// unitSession is the transactional producer of one unit: a client of its own, since a
// transactional.id belongs to one producer and a producer runs one transaction at a time.
type unitSession struct {
	client          *kgo.Client
	checkpointTopic string
	partition       int32
}

// OpenUnit starts the transactional session of unit, whose transactional.id is unit itself, and
// returns the value of the last checkpoint any session of unit committed to checkpointTopic (nil
// when there is none). It implements the forwarder's TransactionalPublisher.
//
// Opening fences every earlier session of unit, in this process or another: the broker aborts
// its open transaction, and its later produce and commit requests fail (Kafka's producer
// fencing, KIP-98). A transaction of that session that was being committed is finished first
// (InitProducerId waits for it), so the checkpoint returned is the last one committed, and no
// commit of an earlier session can follow it.
//
// checkpointTopic is created when missing (compacted, one partition per outbox partition; see
// ensureCheckpointTopic). The checkpoint of unit is written to its partition slot modulo the
// topic's partitions, with unit as the key. Opening an open unit closes its session first.
func (p *Publisher) OpenUnit(ctx context.Context, unit, checkpointTopic string, slot int) ([]byte, error) {
	if unit == "" || checkpointTopic == "" || slot < 0 {
		return nil, fmt.Errorf("kafka: open unit %q on checkpoint topic %q, slot %d: %w", unit, checkpointTopic, slot, ErrInvalidMessage)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return nil, ErrPublisherClosed
	}
	p.CloseUnit(unit)
	partitions, err := p.ensureCheckpointTopic(ctx, checkpointTopic)
	if err != nil {
		return nil, err
	}
	partition := int32(slot) % partitions
	opts := append(p.opts[:len(p.opts):len(p.opts)],
		kgo.TransactionalID(unit),
		kgo.TransactionTimeout(transactionTimeout),
		kgo.MetadataMinAge(retryMetadataMinAge),
		kgo.MaxVersions(explicitPartitionAdds()),
		kgo.ConcurrentTransactionsBackoff(concurrentTransactionsBackoff),
		kgo.RecordPartitioner(checkpointPartitioner{checkpointTopic: checkpointTopic, keyed: partitioner(p.config.Partitioner)}),
	)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: cannot create the transactional producer of unit %q: %w", unit, err)
	}
	if _, _, err := client.ProducerID(ctx); err != nil {
		client.Close()
		return nil, fmt.Errorf("kafka: cannot initialize the transactional producer %q on brokers %v (%s): %w",
			unit, p.config.Brokers, p.config.Security(), err)
	}
	last, err := p.lastCheckpoint(ctx, checkpointTopic, partition, unit)
	if err != nil {
		client.Close()
		return nil, err
	}
	p.units.mu.Lock()
	if p.units.sessions == nil {
		p.units.sessions = map[string]*unitSession{}
	}
	p.units.sessions[unit] = &unitSession{client: client, checkpointTopic: checkpointTopic, partition: partition}
	p.units.mu.Unlock()
	return last, nil
}

// CloseUnit closes the session of unit, if open, aborting its open transaction. It implements
// the forwarder's TransactionalPublisher.
func (p *Publisher) CloseUnit(unit string) {
	p.units.mu.Lock()
	s := p.units.sessions[unit]
	delete(p.units.sessions, unit)
	p.units.mu.Unlock()
	if s != nil {
		abortAndClose(s.client)
	}
}

// abortAndClose aborts the client's open transaction, if any (kgo.Client.Close does not, and an
// open transaction holds back read_committed consumers until it times out), and closes it. A
// fenced or broken session fails the abort at once; it is closed anyway.
func abortAndClose(client *kgo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.AbortBufferedRecords(ctx); err == nil {
		_ = client.EndTransaction(ctx, kgo.TryAbort)
	}
	client.Close()
}

// closeUnits closes every session (Close).
func (p *Publisher) closeUnits() {
	p.units.mu.Lock()
	sessions := p.units.sessions
	p.units.sessions = nil
	p.units.mu.Unlock()
	for _, s := range sessions {
		abortAndClose(s.client)
	}
}

// CommitUnit produces msgs (msgs[i] to topics[i]) and checkpoint, the last record, to the unit's
// checkpoint partition, in one transaction, and commits it. It implements the forwarder's
// TransactionalPublisher. A read_committed consumer sees all of the records or none of them.
//
// It returns exactly len(msgs) errors and a transaction error:
//   - nil error: committed; every errs[i] is nil.
//   - errs[i] non-nil for some i: nothing was committed (the transaction was aborted, or not
//     begun when the client refused a message on its own) and errs[i] says why msgs[i] failed;
//     failures are gapless per key as in PublishEach. A refusal by the broker wraps
//     ErrRefusedInTransaction. The error is non-nil.
//   - only the error non-nil: nothing known was committed for sure: the commit may or may not
//     have happened (a commit whose answer was lost), or the session was fenced by a newer one.
//
// After any error the session is closed: open the unit again, which resolves a commit of unknown
// outcome (the checkpoint it returns says whether it happened).
func (p *Publisher) CommitUnit(ctx context.Context, unit string, topics []string, msgs []*message.Message, checkpoint []byte) ([]error, error) {
	errs := make([]error, len(msgs))
	if len(topics) != len(msgs) {
		return errs, fmt.Errorf("kafka: commit of unit %q: %d topics for %d messages: %w", unit, len(topics), len(msgs), ErrInvalidMessage)
	}
	p.units.mu.Lock()
	s := p.units.sessions[unit]
	p.units.mu.Unlock()
	if s == nil {
		return errs, fmt.Errorf("kafka: commit of unit %q: %w", unit, ErrUnitNotOpen)
	}
	errs, err := p.commit(ctx, s, unit, topics, msgs, checkpoint)
	if err != nil {
		p.CloseUnit(unit)
	}
	return errs, err
}

func (p *Publisher) commit(ctx context.Context, s *unitSession, unit string, topics []string, msgs []*message.Message, checkpoint []byte) ([]error, error) {
	errs := make([]error, len(msgs))
	keys := make([]string, len(msgs))
	records := make([]*kgo.Record, len(msgs))
	failed := 0
	for i, msg := range msgs {
		if msg == nil {
			errs[i] = fmt.Errorf("kafka: message %d of %d is nil: %w", i, len(msgs), ErrInvalidMessage)
			failed++
			continue
		}
		keys[i] = msg.Metadata.Get(p.config.KeyMetadata)
		if records[i], errs[i] = p.record(topics[i], msg); errs[i] != nil {
			failed++
		}
	}
	if failed > 0 {
		closeGaps(msgs, keys, errs)
		return errs, fmt.Errorf("kafka: transaction of unit %q not begun: %d of %d messages refused by the client", unit, failed, len(msgs))
	}
	if err := s.client.BeginTransaction(); err != nil {
		return errs, fmt.Errorf("kafka: begin transaction of unit %q: %w", unit, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var txnErr error // a failure that is not a record's own
	produce := func(i int, rec *kgo.Record) {
		wg.Add(1)
		s.client.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			failed++
			switch {
			case i >= 0 && refusesRecord(err):
				errs[i] = fmt.Errorf("kafka: message %s to topic %q in the transaction of unit %q: %w: %w",
					msgs[i].UUID, topics[i], unit, ErrRefusedInTransaction, err)
			case txnErr == nil:
				txnErr = err
			}
		})
	}
	for i, rec := range records {
		produce(i, rec)
	}
	produce(-1, &kgo.Record{Topic: s.checkpointTopic, Partition: s.partition, Key: []byte(unit), Value: checkpoint})
	wg.Wait()
	if txnErr != nil {
		// Not the records' fault (the producer fenced, the broker unreachable, the checkpoint
		// refused): no record is blamed, so that no key is parked and no attempt counted.
		clear(errs)
	}
	if failed > 0 {
		closeGaps(msgs, keys, errs)
		abortErr := s.client.AbortBufferedRecords(ctx)
		if abortErr == nil {
			abortErr = s.client.EndTransaction(ctx, kgo.TryAbort)
		}
		err := fmt.Errorf("kafka: transaction of unit %q aborted: %d records refused", unit, failed)
		if txnErr != nil {
			err = fmt.Errorf("kafka: transaction of unit %q aborted: %w", unit, txnErr)
		}
		if abortErr != nil {
			err = fmt.Errorf("%w (the abort failed too: %v)", err, abortErr)
		}
		return errs, err
	}
	if p.units.beforeCommit != nil {
		p.units.beforeCommit(unit)
	}
	if err := s.client.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return errs, fmt.Errorf("kafka: commit of the transaction of unit %q (outcome unknown until the unit is opened again): %w", unit, err)
	}
	return errs, nil
}

// refusesRecord reports whether a produce error is about the record (or its topic) rather than
// the transaction or the connection: only such errors are reported per message by CommitUnit.
func refusesRecord(err error) bool {
	for _, code := range []error{kerr.MessageTooLarge, kerr.InvalidRecord, kerr.CorruptMessage, kerr.RecordListTooLarge,
		kerr.TopicAuthorizationFailed, kerr.InvalidTopicException, kerr.PolicyViolation, kerr.InvalidRequiredAcks} {
		if errors.Is(err, code) {
			return true
		}
	}
	return false
}

// checkpointPartitioner places checkpoint records on the partition they name and every other
// record by its key, as the publisher does.
type checkpointPartitioner struct {
	checkpointTopic string
	keyed           kgo.Partitioner
}

// ForTopic implements kgo.Partitioner.
func (c checkpointPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if topic == c.checkpointTopic {
		return kgo.ManualPartitioner().ForTopic(topic)
	}
	return c.keyed.ForTopic(topic)
}
