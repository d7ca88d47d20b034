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
// produce batch only after a metadata refresh, and refreshes at most once per MetadataMinAge
// (5 s by default). With transaction.version 2 (KIP-890) the broker adds a partition to a
// transaction when the transaction's first record reaches it, and refuses that record with
// CONCURRENT_TRANSACTIONS while the markers of the producer's previous transaction are still
// being written. On a replicated cluster that is the usual case for a unit that begins its
// next transaction right after a commit, and each refusal stalled the unit for up to 5 s. With a
// short minimum age the resend waits for one metadata round trip. The cost is more metadata
// requests while a partition has no leader (about one per MetadataMinAge and unit), which is
// why it is not shorter.
const retryMetadataMinAge = 20 * time.Millisecond

// producersPerUnit is how many transactional producers a unit has. They take the unit's
// transactions in turn, one at a time. With transaction.version 2 (KIP-890) a producer's next
// transaction cannot add a partition until the markers of its previous one are written on every
// partition that one touched: the broker answers CONCURRENT_TRANSACTIONS meanwhile, and the
// client resends after a metadata refresh. On a replicated cluster the markers take longer than
// the relay's acknowledgement and next claim, so with one producer nearly every transaction met
// it. With two, a producer's markers have the whole of the other producer's transaction to be
// written. The unit still runs one transaction at a time, begun after the last one committed,
// so its checkpoints follow each other in its checkpoint partition in commit order; opening the
// unit fences all of its producers before reading the last one.
const producersPerUnit = 2

// transactionalIDs returns the transactional.ids of unit's producers: unit itself (so that the
// first producer keeps the id a unit had with one producer, and fences such a producer), then
// unit+"/1", and so on.
func transactionalIDs(unit string) []string {
	ids := []string{unit}
	for i := 1; i < producersPerUnit; i++ {
		ids = append(ids, fmt.Sprintf("%s/%d", unit, i))
	}
	return ids
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

// unitSession holds the transactional producers of one unit (producersPerUnit), each a client of
// its own, since a transactional.id belongs to one producer and a producer runs one transaction
// at a time. next is the producer of the unit's next transaction.
type unitSession struct {
	mu              sync.Mutex // held by a transaction
	producers       []*kgo.Client
	next            int
	checkpointTopic string
	partition       int32
}

// take returns the producer of the session's next transaction and passes the turn on; called
// with mu held.
func (s *unitSession) take() *kgo.Client {
	client := s.producers[s.next]
	s.next = (s.next + 1) % len(s.producers)
	return client
}

// close aborts every producer's open transaction and closes it.
func (s *unitSession) close() {
	var wg sync.WaitGroup
	for _, client := range s.producers {
		wg.Go(func() { abortAndClose(client) })
	}
	wg.Wait()
}

// OpenUnit starts the transactional session of unit, whose producers' transactional.ids are
// unit itself and unit+"/1" (transactionalIDs; the producers take the unit's transactions in
// turn), and returns the value of the last checkpoint any session of unit committed to checkpointTopic (nil
// when there is none). It implements the forwarder's TransactionalPublisher.
//
// Opening fences every earlier session of unit, in this process or another, by initializing
// every producer of the unit (InitProducerId): the broker aborts the session's open transaction, and its later produce and commit requests fail (Kafka's producer
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
	s := &unitSession{checkpointTopic: checkpointTopic, partition: int32(slot) % partitions}
	if s.producers, err = p.initProducers(ctx, unit, checkpointTopic); err != nil {
		return nil, err
	}
	// Every producer of the unit is initialized: no transaction of an earlier session is open
	// or being committed, so the last checkpoint read now is the last one committed.
	last, err := p.lastCheckpoint(ctx, checkpointTopic, s.partition, unit)
	if err != nil {
		s.close()
		return nil, err
	}
	p.units.mu.Lock()
	if p.units.sessions == nil {
		p.units.sessions = map[string]*unitSession{}
	}
	p.units.sessions[unit] = s
	p.units.mu.Unlock()
	return last, nil
}

// initProducers creates the transactional producers of unit (transactionalIDs) and initializes
// them (InitProducerId) in parallel, which fences every earlier producer of the same ids. On an
// error none is left open.
func (p *Publisher) initProducers(ctx context.Context, unit, checkpointTopic string) ([]*kgo.Client, error) {
	ids := transactionalIDs(unit)
	producers := make([]*kgo.Client, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		opts := append(p.opts[:len(p.opts):len(p.opts)],
			kgo.TransactionalID(id),
			kgo.TransactionTimeout(transactionTimeout),
			kgo.MetadataMinAge(retryMetadataMinAge),
			kgo.RecordPartitioner(checkpointPartitioner{checkpointTopic: checkpointTopic, keyed: partitioner(p.config.Partitioner)}),
		)
		client, err := kgo.NewClient(opts...)
		if err != nil {
			errs[i] = fmt.Errorf("kafka: cannot create the transactional producer %q of unit %q: %w", id, unit, err)
			continue
		}
		producers[i] = client
		wg.Go(func() {
			if _, _, err := client.ProducerID(ctx); err != nil {
				errs[i] = fmt.Errorf("kafka: cannot initialize the transactional producer %q on brokers %v (%s): %w",
					id, p.config.Brokers, p.config.Security(), err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, client := range producers {
			if client != nil {
				client.Close()
			}
		}
		return nil, err
	}
	return producers, nil
}

// CloseUnit closes the session of unit, if open, aborting its open transaction. It implements
// the forwarder's TransactionalPublisher.
func (p *Publisher) CloseUnit(unit string) {
	p.units.mu.Lock()
	s := p.units.sessions[unit]
	delete(p.units.sessions, unit)
	p.units.mu.Unlock()
	if s != nil {
		s.close()
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
		s.close()
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
	// One transaction of the unit at a time, whichever producer runs it: a transaction begins
	// after the last one committed, so the checkpoints are in commit order.
	s.mu.Lock()
	defer s.mu.Unlock()
	errs, err := p.commit(ctx, s.take(), s, unit, topics, msgs, checkpoint)
	if err != nil {
		p.CloseUnit(unit)
	}
	return errs, err
}

// commit runs one transaction of the unit's session s on its producer client.
func (p *Publisher) commit(ctx context.Context, client *kgo.Client, s *unitSession, unit string, topics []string, msgs []*message.Message, checkpoint []byte) ([]error, error) {
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
	if err := client.BeginTransaction(); err != nil {
		return errs, fmt.Errorf("kafka: begin transaction of unit %q: %w", unit, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var txnErr error // a failure that is not a record's own
	produce := func(i int, rec *kgo.Record) {
		wg.Add(1)
		client.Produce(ctx, rec, func(_ *kgo.Record, err error) {
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
		abortErr := client.AbortBufferedRecords(ctx)
		if abortErr == nil {
			abortErr = client.EndTransaction(ctx, kgo.TryAbort)
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
	if err := client.EndTransaction(ctx, kgo.TryCommit); err != nil {
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
