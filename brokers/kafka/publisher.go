package kafka

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// pingTimeout bounds NewPublisher's first contact with the brokers.
const pingTimeout = 15 * time.Second

// closeFlushTimeout bounds the flush of Close.
const closeFlushTimeout = 30 * time.Second

// Publisher is a Watermill message.Publisher for Kafka, built on franz-go's kgo.Client, that
// reports the outcome of each message (PublishEach) and sends each call as one pipelined batch.
//
// The client is an idempotent producer with acks=all: its internal retries neither duplicate nor
// reorder records within a partition. Each message becomes a record with the wire format of
// watermill-kafka's Marshaler (the UUID header, one header per metadata entry, the key from
// Config.KeyMetadata), so watermill-kafka's Subscriber (NewSubscriber) reads it. Keys are placed
// by Config.Partitioner, murmur2 like the Java client by default.
//
// Order and gaplessness: all records of a call are handed to the client at once, in the given
// order, so records of one key reach their partition in that order. When a message fails, every
// later message of its key in the same call fails too and is not delivered (see PublishEach).
//
// Publish, PublishEach and Close are safe for concurrent use.
type Publisher struct {
	config Config
	client *kgo.Client
	logger watermill.LoggerAdapter
	opts   []kgo.Opt

	// confirmer sends the records refused with a permanent error once more, alone, one at a
	// time (confirmMu), on a client of its own, created on first use: on the shared client, a
	// record resent alone may still share a batch with a bad record of a concurrent call (two
	// workers whose keys land on one partition) and be refused again with it.
	confirmMu sync.Mutex
	confirmer *kgo.Client

	// units are the transactional sessions of OpenUnit and CommitUnit (transactions.go).
	units units

	mu     sync.RWMutex // held for reading by PublishEach and OpenUnit, for writing by Close
	closed bool
}

// NewPublisher connects a Publisher to the brokers of config: it validates config, builds the
// client (see Config.kgoOptions) and checks that a broker answers (and, with SASL, accepts the
// credentials), so a bad address or password fails here. A nil logger discards logs.
func NewPublisher(config Config, logger watermill.LoggerAdapter) (*Publisher, error) {
	config.setDefaults()
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	logger = logger.With(watermill.LogFields{"provider": "kafka"})
	opts, err := config.kgoOptions(logger)
	if err != nil {
		return nil, err
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: cannot create the producer for brokers %v: %w", config.Brokers, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	if err := client.Ping(ctx); err != nil {
		client.Close()
		return nil, fmt.Errorf("kafka: no broker of %v answered (%s): %w", config.Brokers, config.Security(), err)
	}
	return &Publisher{
		config: config,
		client: client,
		logger: logger,
		opts:   opts,
	}, nil
}

// NewMarshaler returns watermill-kafka's marshaler with the message key taken from the metadata
// entry keyMetadata: the subscriber unmarshals with it, and the publisher's records are what it
// marshals (Publisher.record).
func NewMarshaler(keyMetadata string) wkafka.MarshalerUnmarshaler {
	return wkafka.NewWithPartitioningMarshaler(func(_ string, msg *message.Message) (string, error) {
		return msg.Metadata.Get(keyMetadata), nil
	})
}

// Publish sends msgs to topic and returns once all of them are acknowledged by the broker or
// have failed. It is PublishEach without a deadline: when some fail, it returns a *PublishError
// listing them (the others were acknowledged); classify it with Retriable. After Close it
// returns ErrPublisherClosed.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	errs, err := p.publishEach(context.Background(), topic, msgs)
	if err != nil {
		return err
	}
	var pubErr *PublishError
	for i, e := range errs {
		if e == nil {
			continue
		}
		if pubErr == nil {
			pubErr = &PublishError{Topic: topic, Total: len(msgs)}
		}
		id := ""
		if msgs[i] != nil {
			id = msgs[i].UUID
		}
		pubErr.Failed = append(pubErr.Failed, MessageError{UUID: id, Err: e})
	}
	if pubErr != nil {
		return pubErr
	}
	return nil
}

// PublishEach sends msgs, in the given order, to topic and returns once every message is either
// acknowledged (acks=all) or has failed, with exactly len(msgs) errors: errs[i] is nil when
// msgs[i] was acknowledged. It implements the forwarder's OutcomePublisher.
//
// All records are handed to the client at once (one pipelined produce, no round trip per key).
// Failures are gapless per key (the value of Config.KeyMetadata): when msgs[i] fails, every later
// message of the same key fails too, with an error wrapping ErrEarlierMessageFailed, and is not
// delivered. Messages the client would refuse on its own (larger than Config.MessageMaxBytes,
// invalid) are found before anything is produced and their key's later messages are not
// produced at all; a failure reported by the broker, or a record's retries or ctx running out,
// fails every later buffered record of the partition inside franz-go (see logReorderings). A broker
// refuses a whole batch for one bad record, so a permanent refusal is not believed at once: the
// key's messages from that one on are sent again alone, in order, until one fails alone, which
// then has its own error and holds back the rest of its key (confirmRefusedAlone). Each message
// thus gets its own outcome, also when it shared a refused batch with another key's bad record.
//
// ctx bounds the call: when it ends, records not yet sent fail with its error; a record already
// sent is waited for (the idempotent producer cannot forget a request whose outcome it does not
// know), which can outlast ctx by up to the produce request timeout. After Close every message
// fails with ErrPublisherClosed.
func (p *Publisher) PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error {
	errs, err := p.publishEach(ctx, topic, msgs)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// publishEach is PublishEach; a non-nil second result fails the whole call before anything is
// sent: ErrPublisherClosed, no topic, ctx already ended.
func (p *Publisher) publishEach(ctx context.Context, topic string, msgs []*message.Message) ([]error, error) {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs, nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return errs, ErrPublisherClosed
	}
	if topic == "" {
		return errs, fmt.Errorf("kafka: %d messages have no topic: %w", len(msgs), ErrInvalidMessage)
	}
	if err := ctx.Err(); err != nil {
		return errs, fmt.Errorf("kafka: %d messages not sent to topic %q: %w", len(msgs), topic, err)
	}
	records, keys := p.records(topic, msgs, errs)
	p.produceAll(ctx, topic, msgs, records, errs)
	p.logReorderings(topic, msgs, keys, errs)
	p.confirmRefusedAlone(ctx, topic, msgs, records, keys, errs)
	return errs, nil
}

// records marshals and checks every message before any is produced: a message the client would
// refuse on its own fails here (errs[i]), and so does every later message of its key. (franz-go
// refuses an oversized record alone and still produces the later records of its partition,
// which would leave a gap.) It returns the records (nil for the failed messages) and the keys.
func (p *Publisher) records(topic string, msgs []*message.Message, errs []error) ([]*kgo.Record, []string) {
	keys := make([]string, len(msgs))
	firstFailed := map[string]int{} // key -> index of its first failed message
	records := make([]*kgo.Record, len(msgs))
	for i, msg := range msgs {
		if msg == nil {
			errs[i] = fmt.Errorf("kafka: message %d of %d for topic %q is nil: %w", i, len(msgs), topic, ErrInvalidMessage)
			continue
		}
		key := msg.Metadata.Get(p.config.KeyMetadata)
		keys[i] = key
		if first, ok := firstFailed[key]; ok {
			errs[i] = earlierFailed(msg, msgs[first], key, errs[first])
			continue
		}
		rec, err := p.record(topic, msg)
		if err != nil {
			errs[i] = err
			firstFailed[key] = i
			continue
		}
		records[i] = rec
	}
	return records, keys
}

// produceAll produces the records in one pipelined call: every record is buffered at once, the
// promises run as the broker answers, and it returns once all have answered. Produce blocks only
// while the client's buffer is full (50,000 records).
func (p *Publisher) produceAll(ctx context.Context, topic string, msgs []*message.Message, records []*kgo.Record, errs []error) {
	p.logger.Trace("Sending messages to Kafka", watermill.LogFields{"topic": topic, "count": len(msgs)})
	var wg sync.WaitGroup
	for i, rec := range records {
		if rec == nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			// Nothing is produced once ctx has ended, so no later record can succeed after an
			// earlier one failed for this reason.
			errs[i] = fmt.Errorf("kafka: message %s not sent to topic %q: %w", msgs[i].UUID, topic, err)
			continue
		}
		wg.Add(1)
		p.client.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				errs[i] = fmt.Errorf("kafka: message %s to topic %q: %w", msgs[i].UUID, topic, err)
			}
		})
	}
	wg.Wait()
}

// logReorderings makes the failures gapless per key after the broker's answers (closeGaps) and
// logs each key whose later messages were acknowledged after an earlier one failed.
//
// franz-go keeps failures gapless per partition for the idempotent producer: a failed record
// fails every later buffered record of its partition. From franz-go v1.22.3, pkg/kgo:
//   - sink.go, finishBatch: "We know that Kafka replied this batch is a failure. We can fail
//     this batch and all batches in this partition. This will keep sequence numbers
//     correct." (recBuf.failAllRecords);
//   - config.go, RecordRetries and RecordDeliveryTimeout: "If a record fails due to retries
//     [times out], all records buffered in the same partition are failed as well. This
//     ensures gapless ordering: the client will not fail one record only to produce a later
//     one successfully.";
//   - producer.go, Produce: on context cancellation, timeout or retries, "if it is currently
//     safe to fail records, all buffered records for the relevant partition are failed".
//
// A key lives on one partition, so this is gapless per key. Checked here anyway: a later record
// of a key that succeeded after an earlier one failed is a reordering that cannot be undone; it
// is logged as an error and reported as failed, so that it is sent again after the earlier one
// (a duplicate the consumer's dedup absorbs, and the key's last message is the last one again).
// Later failures of a key get ErrEarlierMessageFailed, retriable: franz-go fails them with the
// error of the first, which says nothing about them. One log line per key: its first failure,
// how many later messages were acknowledged.
func (p *Publisher) logReorderings(topic string, msgs []*message.Message, keys []string, errs []error) {
	var order []int
	count := map[int]int{}
	firstLater := map[int]int{}
	cause := map[int]error{}
	for _, r := range closeGaps(msgs, keys, errs) {
		if count[r.first] == 0 {
			order = append(order, r.first)
			firstLater[r.first], cause[r.first] = r.later, r.cause
		}
		count[r.first]++
	}
	for _, first := range order {
		p.logger.Error(ReorderedLogMessage, cause[first], watermill.LogFields{
			"topic": topic, "key": keys[first], "failed_uuid": msgs[first].UUID,
			"reordered": count[first], "first_reordered_uuid": msgs[firstLater[first]].UUID,
		})
	}
}

// record converts msg to a franz-go record with watermill-kafka's wire format (what NewMarshaler
// marshals: the UUID header, one header per metadata entry, the key from KeyMetadata), built
// directly rather than through the Sarama message the marshaler returns, and checks that the
// client will not refuse it.
func (p *Publisher) record(topic string, msg *message.Message) (*kgo.Record, error) {
	if _, reserved := msg.Metadata[wkafka.UUIDHeaderKey]; reserved {
		return nil, fmt.Errorf("kafka: cannot marshal message %s for topic %q: %w: metadata %s is reserved by watermill for the message UUID",
			msg.UUID, topic, ErrInvalidMessage, wkafka.UUIDHeaderKey)
	}
	// The key is never nil, even when empty: franz-go hashes an empty key like any other and
	// spreads nil keys.
	rec := &kgo.Record{Topic: topic, Key: []byte(msg.Metadata.Get(p.config.KeyMetadata)), Value: msg.Payload,
		Headers: make([]kgo.RecordHeader, 0, 1+len(msg.Metadata))}
	rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: wkafka.UUIDHeaderKey, Value: []byte(msg.UUID)})
	for k, v := range msg.Metadata {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	if size := recordBatchSize(rec); size > p.config.MessageMaxBytes {
		return nil, fmt.Errorf("kafka: message %s is %d bytes as a record batch, above message_max_bytes %d: %w",
			msg.UUID, size, p.config.MessageMaxBytes, kerr.MessageTooLarge)
	}
	return rec, nil
}

// Retriable classifies the publisher's errors with the package function Retriable. The
// forwarder uses it when its Config.IsRetriable is not set (forwarder.ErrorClassifier).
func (p *Publisher) Retriable(err error) bool { return Retriable(err) }

// Close flushes and closes the client. Publish and PublishEach calls in progress finish first;
// later ones return ErrPublisherClosed. Close is idempotent.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), closeFlushTimeout)
	defer cancel()
	// Nothing of ours is buffered (every call has returned), but flush anyway before closing:
	// kgo.Client.Close fails buffered records with ErrClientClosed.
	flushErr := p.client.Flush(ctx)
	p.closeUnits()
	p.client.Close()
	p.confirmMu.Lock()
	if p.confirmer != nil {
		p.confirmer.Close()
	}
	p.confirmMu.Unlock()
	if flushErr != nil {
		return fmt.Errorf("kafka: cannot flush the producer before closing it: %w", flushErr)
	}
	return nil
}
