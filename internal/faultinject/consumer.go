package faultinject

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	apulsar "github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/middleware"
	"github.com/outboxkit/outboxkit/outbox"
)

// payload is the body of every event the writers commit: its key and per-key sequence number.
type payload struct {
	Key string `json:"key"`
	Seq int64  `json:"seq"`
	// Pad makes a poison event larger than the broker accepts.
	Pad string `json:"pad,omitempty"`
	// DeliverAt is a scheduled event's delivery time (RFC 3339, to the microsecond).
	DeliverAt string `json:"deliver_at,omitempty"`
}

// delivery is one message read from the broker.
type delivery struct {
	id      string
	key     string
	seq     int64
	bad     string // why the message could not be decoded, if it could not
	payload []byte
	headers map[string]string
	where   string // partition/offset (Kafka) or message id (Pulsar), for diagnostics
	at      time.Time
	// ts is the Kafka record's timestamp: the relay's clock when it produced the record.
	ts time.Time
	// scheduled says the payload carries a deliver_at.
	scheduled bool
}

// recorder keeps every delivery in arrival order and feeds each one to the inbox.
type recorder struct {
	mu         sync.Mutex
	deliveries []delivery
	distinct   map[string]bool
	inboxCh    []chan delivery
	inboxWG    sync.WaitGroup
	inboxErrs  []error
	lastAt     time.Time
}

// newRecorder starts workers inbox workers that run handler for every delivery; deliveries of
// one key go to one worker.
func newRecorder(workers int, handler message.NoPublishHandlerFunc) *recorder {
	r := &recorder{distinct: map[string]bool{}}
	for range workers {
		ch := make(chan delivery, 4096)
		r.inboxCh = append(r.inboxCh, ch)
		r.inboxWG.Add(1)
		go func() {
			defer r.inboxWG.Done()
			for d := range ch {
				r.handle(handler, d)
			}
		}()
	}
	return r
}

func (r *recorder) handle(handler message.NoPublishHandlerFunc, d delivery) {
	if d.id == "" {
		return
	}
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		msg := message.NewMessage(d.id, d.payload)
		for k, v := range d.headers {
			msg.Metadata.Set(k, v)
		}
		if err = handler(msg); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.mu.Lock()
	r.inboxErrs = append(r.inboxErrs, fmt.Errorf("inbox handler for event %s: %w", d.id, err))
	r.mu.Unlock()
}

func (r *recorder) add(d delivery) {
	r.mu.Lock()
	d.at = time.Now()
	r.deliveries = append(r.deliveries, d)
	r.distinct[d.id] = true
	r.lastAt = time.Now()
	r.mu.Unlock()
	h := fnv.New32a()
	_, _ = h.Write([]byte(d.key))
	r.inboxCh[int(h.Sum32())%len(r.inboxCh)] <- d
}

// has reports whether every id in ids was delivered at least once.
func (r *recorder) missing(ids map[string]bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for id := range ids {
		if !r.distinct[id] {
			n++
		}
	}
	return n
}

// count returns the number of distinct events delivered so far.
func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.distinct)
}

// notDeliveredBy counts the ids whose first delivery did not happen before t.
func (r *recorder) notDeliveredBy(ids []string, t time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	early := map[string]bool{}
	for _, d := range r.deliveries {
		if d.at.Before(t) {
			early[d.id] = true
		}
	}
	n := 0
	for _, id := range ids {
		if !early[id] {
			n++
		}
	}
	return n
}

func (r *recorder) idleFor() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastAt.IsZero() {
		return 0
	}
	return time.Since(r.lastAt)
}

// closeInbox waits for the inbox workers to handle everything queued.
func (r *recorder) closeInbox() error {
	for _, ch := range r.inboxCh {
		close(ch)
	}
	r.inboxWG.Wait()
	return errors.Join(r.inboxErrs...)
}

func decode(id, key string, value []byte, headers map[string]string) delivery {
	d := delivery{id: id, key: key, payload: value, headers: headers}
	var p payload
	if err := json.Unmarshal(value, &p); err != nil {
		d.bad = fmt.Sprintf("payload is not JSON: %v", err)
	} else if p.Key != key {
		d.bad = fmt.Sprintf("payload key %q differs from the message key %q", p.Key, key)
	}
	d.seq, d.scheduled = p.Seq, p.DeliverAt != ""
	if id == "" {
		d.bad = "no event_id"
	}
	return d
}

// consumeKafka reads topic from its start (each value decoded through reg in the schema variant), read_committed (records of aborted transactions are
// skipped; without transactions it reads everything), until ctx is cancelled; it never joins a
// group, so nothing is redelivered by the consumer itself: every repeated event id is a relay
// duplicate.
func consumeKafka(ctx context.Context, addrs []string, topic string, rec *recorder, reg *registry) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return fmt.Errorf("faultinject: kafka consumer: %w", err)
	}
	defer client.Close()
	for ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		fetches.EachRecord(func(r *kgo.Record) {
			headers := make(map[string]string, len(r.Headers))
			for _, h := range r.Headers {
				headers[h.Key] = string(h.Value)
			}
			id := headers[outbox.MetadataEventID]
			var d delivery
			if value, err := reg.decodeValue(ctx, r.Value); err != nil {
				d = delivery{id: id, key: string(r.Key), payload: r.Value, headers: headers,
					bad: fmt.Sprintf("payload does not decode with the registry: %v", err)}
			} else {
				d = decode(id, string(r.Key), value, headers)
			}
			d.where = fmt.Sprintf("partition %d offset %d", r.Partition, r.Offset)
			d.ts = r.Timestamp
			rec.add(d)
		})
	}
	return nil
}

// consumePulsar reads topic through an Exclusive subscription from the earliest message.
// Messages the broker redelivers after a reconnect (same message id) are skipped, so every
// repeated event id is a relay duplicate.
func consumePulsar(ctx context.Context, url, topic string, rec *recorder) error {
	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: url, OperationTimeout: 30 * time.Second,
		ConnectionTimeout: 10 * time.Second, Logger: plog.DefaultNopLogger()})
	if err != nil {
		return fmt.Errorf("faultinject: pulsar client: %w", err)
	}
	defer client.Close()
	consumer, err := client.Subscribe(apulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "faultinject-check", Type: apulsar.Exclusive,
		SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		return fmt.Errorf("faultinject: pulsar subscribe %s: %w", topic, err)
	}
	defer consumer.Close()
	seen := map[string]bool{}
	for ctx.Err() == nil {
		msg, err := consumer.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		// MessageID.String leaves out the batch index: build the key from every part.
		id := msg.ID()
		mid := fmt.Sprintf("%d:%d:%d:%d", id.LedgerID(), id.EntryID(), id.BatchIdx(), id.PartitionIdx())
		if !seen[mid] {
			seen[mid] = true
			props := msg.Properties()
			d := decode(props[outbox.MetadataEventID], msg.Key(), msg.Payload(), props)
			d.where = "message " + mid
			rec.add(d)
		}
		_ = consumer.Ack(msg)
	}
	return nil
}

// newEffectHandler returns the inbox-wrapped consumer handler: one effect row per event,
// inserted (by insert, which takes the event id) in the inbox's transaction.
func newEffectHandler(db *sql.DB, dialect outbox.Dialect, inboxTable, insert string) (message.NoPublishHandlerFunc, *middleware.Inbox, error) {
	inbox, err := middleware.NewInbox(middleware.InboxConfig{DB: db, Dialect: dialect,
		Table: inboxTable, ConsumerName: "faultinject"}, nil)
	if err != nil {
		return nil, nil, err
	}
	if err := inbox.Migrate(context.Background()); err != nil {
		return nil, nil, fmt.Errorf("faultinject: inbox migrate: %w", err)
	}
	// insert names a table generated by this package (a validated name), never user input.
	h := inbox.ConsumerHandler(func(ctx context.Context, tx *sql.Tx, msg *message.Message) error {
		_, err := tx.ExecContext(ctx, insert, msg.Metadata.Get(outbox.MetadataEventID))
		return err
	})
	return h, inbox, nil
}
