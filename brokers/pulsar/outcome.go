package pulsar

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	apulsar "github.com/apache/pulsar-client-go/pulsar"
)

// ErrEarlierMessageFailed is the outcome of a message that PublishEach did not send
// because an earlier message of the same key in the call failed (errors.Is works on it).
var ErrEarlierMessageFailed = errors.New("pulsar: not sent: an earlier message of the same key failed")

// ErrAcknowledgedAfterFailure is the outcome of a message the broker acknowledged after an
// earlier message of its key in the same call had failed. The broker has it, but it is
// reported as failed so that the outcomes stay gapless: the caller retries it after the
// failed one, and its consumers see a duplicate (deduplicated by the message UUID).
var ErrAcknowledgedAfterFailure = errors.New("pulsar: acknowledged after an earlier message of the same key failed; reported as failed to keep the key gapless")

// frameOverhead bounds what a message adds to its payload on the wire besides its
// properties and key: the command, the message metadata (producer name, sequence id,
// publish time, sizes), the batch entry's own metadata, checksum and size fields.
const frameOverhead = 512

// PublishEach sends msgs, in the given order, to topic and reports the outcome of each:
// errs[i] is nil when the broker acknowledged msgs[i]. It returns exactly len(msgs) errors,
// after every message was acknowledged or failed, and at the latest when ctx is done or
// SendTimeout has passed since the call started. The key of a message is its KeyMetadata
// entry (messages without one count as one key). Messages of one key reach the broker in
// the given order and fail gaplessly: once msgs[i] failed, every later message of its key
// in the call fails too. It is forwarder.OutcomePublisher; see docs/pulsar.md.
//
// How the gaplessness is obtained, from pulsar-client-go v0.19.0's producer_partition.go:
//
//   - Refusals on the client side happen inside SendAsync, before the message is queued
//     (internalSendAsync: validateMsg, updateChunkInfo's ErrMessageTooLarge against the
//     broker's maxMessageSize, reserveResources' ErrContextExpired, ErrProducerClosed),
//     and their callback runs synchronously. PublishEach checks what it can before
//     sending anything (nil message, a metadata entry named UUIDProperty that is not the
//     UUID, the estimated size against MaxMessageSize) and, while handing messages over,
//     sends no message of a key that already has a failure (synchronous or from an
//     earlier callback); those get ErrEarlierMessageFailed.
//   - A message larger than BatchingMaxSize never shares a batch (batchContainer.hasSpace
//     in internal/batch_builder.go), so the size check also rules out a whole batch
//     failing at flush with ErrExceedMaxMessageSize (internalFlushCurrentBatch[es]; the
//     multi-batch path even returns without writing the other keys' batches).
//   - After sending, the producer keeps one FIFO pendingQueue in sequence-id order,
//     filled only by its single event loop (writeData). An acknowledgement completes the
//     head of the queue only (ReceivedSendReceipt; a receipt ahead of the head closes the
//     connection), so acknowledgements arrive in send order. A broker SendError either
//     closes the connection or (NotAllowed, TopicTerminated) drops the producer from it
//     (internal/connection.go handleSendError): no message is failed individually. On
//     reconnection grabCnx re-writes the whole pending queue, in order, before new writes
//     (both under the queue's lock). Closing (Close, topic terminated or deleted, producer
//     fenced: doClose) fails the whole pending queue (failPendingMessages), and writeData
//     fails every later batch once the producer's context is cancelled.
//   - Two mechanisms do fail a message while a later one of the same producer may still
//     be acknowledged. failTimeoutMessages fails the pending items whose SendTimeout has
//     passed, oldest first, while younger items stay, are re-sent on reconnection and
//     can be acknowledged; so a failure of message i does NOT imply the failure of the
//     later pending messages. PublishEach therefore disables pulsar-client-go's send
//     timeout (SendTimeout -1, createProducer) and enforces SendTimeout itself: when the
//     call gives up waiting it fails every message not yet acknowledged and retires the
//     producer (closing it fails its whole pending queue at once; the next call creates a
//     new one). Second, ProducerBlockedQuotaExceeded during a reconnection fails the
//     pending queue but keeps the producer, so messages still in the batch builder may be
//     sent afterwards. For that case, and any other, the outcomes are made gapless at the
//     end: a later message of a failed key that was nevertheless acknowledged is reported
//     as ErrAcknowledgedAfterFailure and logged at error level (it cannot be undone; the
//     retry duplicates it, and its order relative to the failed message is lost if the
//     failed one never reached the broker).
//
// A failed message may still have reached the broker (an acknowledgement lost with the
// connection, or written before the producer was retired): at-least-once, deduplicated by
// the consumer on the message UUID.
func (p *Publisher) PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error {
	return p.publishEach(ctx, topic, msgs, nil, nil)
}

// publishEach is PublishEach where msgs[i] is sent with schemas[i] when schemas is not nil, and
// fails with refused[i] when refused is not nil and refused[i] is not (its schema is unusable).
func (p *Publisher) publishEach(ctx context.Context, topic string, msgs []*message.Message, schemas []apulsar.Schema, refused []error) []error {
	errs := make([]error, len(msgs))
	if ctx == nil {
		ctx = context.Background()
	}
	p.closeMu.RLock()
	defer p.closeMu.RUnlock()
	if p.closed {
		fillNil(errs, fmt.Errorf("pulsar: publish to %s: %w", topic, ErrPublisherClosed))
		return errs
	}
	if len(msgs) == 0 {
		return errs
	}
	full, err := p.config.FullTopicName(topic)
	if err != nil {
		fillNil(errs, fmt.Errorf("%w: %w", ErrInvalidTopic, err))
		return errs
	}

	call := &publishCall{
		topic:   full,
		msgs:    msgs,
		schemas: schemas,
		keys:    make([]string, len(msgs)),
		errs:    errs,
		done:    make([]bool, len(msgs)),
		failed:  map[string]int{},
		settled: make(chan struct{}),
	}
	// Refuse before sending anything what the producer would refuse.
	for i, msg := range msgs {
		if msg != nil {
			call.keys[i] = msg.Metadata.Get(p.config.KeyMetadata)
		}
		if err := p.check(full, i, msgs); err != nil {
			call.fail(i, err)
		} else if refused != nil && refused[i] != nil {
			call.fail(i, refused[i])
		}
	}
	if call.remaining() == 0 {
		return call.finish(p.logger)
	}

	slot, err := p.producer(ctx, full)
	if err != nil {
		call.failRest(err)
		return call.finish(p.logger)
	}

	sendCtx, cancel := context.WithTimeout(ctx, p.config.SendTimeout)
	defer cancel()
	if !p.handOver(ctx, sendCtx, slot, call) {
		// The call stopped waiting with messages still in the producer: retire it so that
		// none of them is sent later, after the failure was reported.
		p.retire(full, slot)
	}
	return call.finish(p.logger)
}

// handOver sends every message of call not failed yet, flushes, and waits for the
// callbacks until ctx (the caller's context, bounded by SendTimeout) is done. It reports
// whether nothing of the call is left in the producer.
func (p *Publisher) handOver(parent, ctx context.Context, slot *producerSlot, call *publishCall) bool {
	producer := slot.producer
	slot.sendMu.RLock()
	for i, msg := range call.msgs {
		if !call.claim(i) {
			continue // failed already, or a message of its key did
		}
		pm := p.toProducerMessage(msg)
		pm.Schema = call.schema(i)
		producer.SendAsync(ctx, pm, func(_ apulsar.MessageID, _ *apulsar.ProducerMessage, err error) {
			if err != nil {
				err = fmt.Errorf("pulsar: publish message %s to %s: %w", msg.UUID, call.topic, schemaRefused(pm.Schema, err))
			}
			call.complete(i, err)
		})
	}
	if !p.config.DisableBatching {
		// Sends the current batch now instead of after BatchingMaxPublishDelay. A flush
		// error concerns the same messages, whose callbacks report it individually.
		if err := producer.FlushWithCtx(ctx); err != nil {
			p.logger.Debug("Flush reported an error; per-message results follow",
				watermill.LogFields{"topic": call.topic, "error": err.Error()})
		}
	}
	slot.sendMu.RUnlock()
	call.handedOver()

	select {
	case <-call.settled:
		return true
	case <-ctx.Done():
	}
	reason := parent.Err()
	if reason == nil {
		reason = fmt.Errorf("not acknowledged within SendTimeout %s: %w", p.config.SendTimeout, apulsar.ErrSendTimeout)
	}
	return call.abandon(func(i int) error {
		return fmt.Errorf("pulsar: publish message %s to %s: %w", call.msgs[i].UUID, call.topic, reason)
	})
}

// check returns why msgs[i] would be refused by the producer or the broker, or nil.
func (p *Publisher) check(topic string, i int, msgs []*message.Message) error {
	msg := msgs[i]
	if msg == nil {
		return fmt.Errorf("pulsar: publish to %s: message %d of %d is nil: %w", topic, i, len(msgs), apulsar.ErrInvalidMessage)
	}
	if v, ok := msg.Metadata[UUIDProperty]; ok && v != msg.UUID {
		return fmt.Errorf("pulsar: publish message %s to %s: metadata entry %s is reserved for the message UUID (has %q): %w",
			msg.UUID, topic, UUIDProperty, v, apulsar.ErrInvalidMessage)
	}
	if size := p.estimateSize(msg); size > p.config.MaxMessageSize {
		return fmt.Errorf("pulsar: publish message %s to %s: about %d bytes with metadata, above MaxMessageSize %d: %w",
			msg.UUID, topic, size, p.config.MaxMessageSize, apulsar.ErrMessageTooLarge)
	}
	return nil
}

// estimateSize is an upper bound of the size pulsar-client-go checks against the broker's
// maxMessageSize: payload (grown by the codec's worst case), properties, key, ordering key
// and frame overhead.
func (p *Publisher) estimateSize(msg *message.Message) int {
	size := len(msg.Payload) + frameOverhead + len(UUIDProperty) + len(msg.UUID) + 8
	for k, v := range msg.Metadata {
		size += len(k) + len(v) + 8 // protobuf tags and lengths
	}
	size += 2 * len(msg.Metadata.Get(p.config.KeyMetadata))
	if c, _ := p.config.Compression.pulsarType(); c != apulsar.NoCompression {
		size += size/128 + 64 // incompressible input grows: lz4 n/255, zstd n/128, zlib less
	}
	return size
}

// publishCall is the state of one PublishEach call, shared with its callbacks.
type publishCall struct {
	topic   string
	msgs    []*message.Message
	schemas []apulsar.Schema // nil: every message is bytes
	keys    []string

	mu       sync.Mutex
	errs     []error
	done     []bool         // errs[i] is final
	failed   map[string]int // key -> index of its first failure
	left     int            // messages sent whose callback has not run
	finished bool           // finish ran: late callbacks are ignored
	settled  chan struct{}  // closed when left reaches 0 after handing over
	handed   bool           // handing over is complete
}

// schema is the schema msgs[i] is sent with, nil for bytes.
func (c *publishCall) schema(i int) apulsar.Schema {
	if c.schemas == nil {
		return nil
	}
	return c.schemas[i]
}

// fail records a failure of msgs[i] (before sending).
func (c *publishCall) fail(i int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs[i] = err
	c.done[i] = true
	c.markFailed(i)
}

// markFailed records that msgs[i] failed (c.mu held).
func (c *publishCall) markFailed(i int) {
	if first, ok := c.failed[c.keys[i]]; !ok || i < first {
		c.failed[c.keys[i]] = i
	}
}

// remaining is the number of messages without an outcome, outside the sending phase.
func (c *publishCall) remaining() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, d := range c.done {
		if !d {
			n++
		}
	}
	return n
}

// failRest fails every message without an outcome.
func (c *publishCall) failRest(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.errs {
		if !c.done[i] {
			c.errs[i] = err
			c.done[i] = true
		}
	}
}

// claim reports whether msgs[i] is to be sent now; if a message of its key failed, it gets
// ErrEarlierMessageFailed instead.
func (c *publishCall) claim(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done[i] {
		return false
	}
	if first, ok := c.failed[c.keys[i]]; ok && first < i {
		c.errs[i] = fmt.Errorf("pulsar: publish message %s to %s: %w", c.msgs[i].UUID, c.topic, ErrEarlierMessageFailed)
		c.done[i] = true
		return false
	}
	c.left++
	return true
}

// handedOver marks the end of the sending loop.
func (c *publishCall) handedOver() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handed = true
	if c.left == 0 {
		close(c.settled)
	}
}

// complete records the callback of msgs[i]. Callbacks may run synchronously inside
// SendAsync (client-side refusals) or from the connection's goroutine.
func (c *publishCall) complete(i int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished || c.done[i] {
		return
	}
	c.errs[i] = err
	c.done[i] = true
	if err != nil {
		c.markFailed(i)
	}
	c.left--
	if c.handed && c.left == 0 {
		close(c.settled)
	}
}

// abandon fails every sent message without an outcome with reason(i) and reports whether
// there was none.
func (c *publishCall) abandon(reason func(i int) error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	clean := true
	for i := range c.msgs {
		if !c.done[i] {
			c.errs[i] = reason(i)
			c.done[i] = true
			clean = false
		}
	}
	c.finished = true
	return clean
}

// finish makes the outcomes gapless per key and returns them: a message after a failure of
// its key that the broker nevertheless acknowledged becomes ErrAcknowledgedAfterFailure.
func (c *publishCall) finish(logger watermill.LoggerAdapter) []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.finished = true
	failedKeys := map[string]int{} // key -> index of its first failure
	for i, err := range c.errs {
		first, failed := failedKeys[c.keys[i]]
		switch {
		case err != nil:
			if !failed {
				failedKeys[c.keys[i]] = i
			}
		case failed:
			logger.Error("Message acknowledged after an earlier message of its key failed: reported as failed, "+
				"its retry will be a duplicate and its order relative to the failed message may be broken",
				c.errs[first], watermill.LogFields{
					"topic": c.topic, "message_uuid": c.msgs[i].UUID, "key": c.keys[i],
					"failed_message_uuid": uuidOf(c.msgs[first]),
				})
			c.errs[i] = fmt.Errorf("pulsar: publish message %s to %s: %w", c.msgs[i].UUID, c.topic, ErrAcknowledgedAfterFailure)
		}
	}
	return c.errs
}

func uuidOf(msg *message.Message) string {
	if msg == nil {
		return ""
	}
	return msg.UUID
}

// fillNil sets every nil entry of errs to err.
func fillNil(errs []error, err error) {
	for i := range errs {
		if errs[i] == nil {
			errs[i] = err
		}
	}
}
