package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrInvalidTopic marks a topic that cannot be an exchange of this package (empty, longer than
// 200 bytes, starting with the reserved "amq.", or holding a line break). Permanent.
var ErrInvalidTopic = errors.New("rabbitmq: invalid topic")

// maxTopicLength leaves room in the 255 bytes of an AMQP name for the partition and group
// suffixes of the queue names.
const maxTopicLength = 200

// checkTopic returns why topic cannot be published to, or nil.
func checkTopic(topic string) error {
	switch {
	case topic == "":
		return fmt.Errorf("%w: empty", ErrInvalidTopic)
	case len(topic) > maxTopicLength:
		return fmt.Errorf("%w %.40q...: %d bytes, more than %d", ErrInvalidTopic, topic, len(topic), maxTopicLength)
	case strings.HasPrefix(topic, "amq."):
		return fmt.Errorf("%w %q: names starting with amq. are reserved by the broker", ErrInvalidTopic, topic)
	case strings.ContainsAny(topic, "\r\n"):
		return fmt.Errorf("%w %q: line break", ErrInvalidTopic, topic)
	}
	return nil
}

// Partition is the partition of key among n: FNV-1a (32 bits) of the key, modulo n (the same
// function as brokers/nats).
func Partition(key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// RoutingKey is the routing key of a message with partition key key on topic: the topic
// itself, or with Partitions N > 0, <topic>.<p> where p = Partition(key, N).
func (c Config) RoutingKey(topic, key string) string {
	if c.Partitions == 0 {
		return topic
	}
	return topic + "." + strconv.Itoa(Partition(key, c.Partitions))
}

// routingKeys are every routing key of topic, in partition order.
func (c Config) routingKeys(topic string) []string {
	if c.Partitions == 0 {
		return []string{topic}
	}
	keys := make([]string, c.Partitions)
	for p := range keys {
		keys[p] = topic + "." + strconv.Itoa(p)
	}
	return keys
}

// QueueName is the queue of consumer group group bound to routingKey: the routing key itself,
// or <routingKey>:<group>.
func QueueName(routingKey, group string) string {
	if group == "" {
		return routingKey
	}
	return routingKey + ":" + group
}

// Queues are the queues of topic for Config.ConsumerGroup, in partition order.
func (c Config) Queues(topic string) []string {
	keys := c.routingKeys(topic)
	queues := make([]string, len(keys))
	for i, key := range keys {
		queues[i] = QueueName(key, c.ConsumerGroup)
	}
	return queues
}

// queueArgs are the arguments of every queue this package declares: its type and single
// active consumer (one consumer at a time reads the queue, so it is read in order).
func (c Config) queueArgs() amqp.Table {
	return amqp.Table{"x-queue-type": c.QueueType, "x-single-active-consumer": true}
}

// declare declares the exchange of topic and, for group, its queues and their bindings, on ch.
func (c Config) declare(ch *amqp.Channel, topic, group string) error {
	if err := ch.ExchangeDeclare(topic, amqp.ExchangeDirect, true, false, false, false, nil); err != nil {
		return fmt.Errorf("rabbitmq: declare exchange %s: %w", topic, err)
	}
	for _, key := range c.routingKeys(topic) {
		queue := QueueName(key, group)
		if _, err := ch.QueueDeclare(queue, true, false, false, false, c.queueArgs()); err != nil {
			return fmt.Errorf("rabbitmq: declare queue %s: %w", queue, err)
		}
		if err := ch.QueueBind(queue, key, topic, false, nil); err != nil {
			return fmt.Errorf("rabbitmq: bind queue %s to exchange %s with %s: %w", queue, topic, key, err)
		}
	}
	return nil
}

// topology declares the topology of each topic once, and remembers the success.
type topology struct {
	config Config
	conn   *connector

	mu       sync.Mutex
	declared map[string]bool
	// declaring is held (a one-slot semaphore, so that waiting honours the caller's context)
	// while a topic is declared: RabbitMQ 3.10 answered two channels declaring the same new
	// durable queue at once with a 404 for one of them ("home node … of durable queue … is down
	// or inaccessible"), which failed the messages of a publisher's concurrent first calls.
	declaring chan struct{}
	// declare declares a topic's exchange and queues on a channel (Config.declare for the
	// configured consumer group).
	declare func(ch *amqp.Channel, topic string) error
}

func newTopology(config Config, conn *connector) *topology {
	return &topology{config: config, conn: conn, declared: map[string]bool{}, declaring: make(chan struct{}, 1),
		declare: func(ch *amqp.Channel, topic string) error { return config.declare(ch, topic, config.ConsumerGroup) }}
}

// ensure declares the exchange of topic and the queues of the configured consumer group,
// unless done before or Config.DisableTopology, one topic at a time. A failure is not
// remembered.
func (t *topology) ensure(ctx context.Context, topic string) error {
	if t.config.DisableTopology || t.isDeclared(topic) {
		return nil
	}
	select {
	case t.declaring <- struct{}{}:
		defer func() { <-t.declaring }()
	case <-ctx.Done():
		return fmt.Errorf("rabbitmq: declare topic %s: %w", topic, ctx.Err())
	}
	if t.isDeclared(topic) {
		return nil // declared by the call this one waited for
	}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("rabbitmq: declare topic %s: %w", topic, err)
		}
		err := t.declareOnce(topic)
		if err == nil {
			t.mu.Lock()
			t.declared[topic] = true
			t.mu.Unlock()
			return nil
		}
		if attempt == declareAttempts || !queueStarting(err) {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		}
	}
}

// declareAttempts bounds the declarations of a topic by one ensure call when the broker answers
// that a queue is not ready yet (queueStarting).
const declareAttempts = 4

// declareOnce declares topic's topology on a channel of its own (a refused declaration closes
// the channel).
func (t *topology) declareOnce(topic string) error {
	ch, err := t.conn.channel()
	if err != nil {
		return err
	}
	defer func() { _ = ch.Close() }()
	return t.declare(ch, topic)
}

// queueStarting reports the 404 RabbitMQ answers a declaration of a durable queue that another
// connection is declaring at the same moment ("home node … of durable queue … is down or
// inaccessible"): the queue exists a moment later, so the declaration is tried again.
func queueStarting(err error) bool {
	var amqpErr *amqp.Error
	return errors.As(err, &amqpErr) && amqpErr.Code == amqp.NotFound && strings.Contains(amqpErr.Reason, "is down or inaccessible")
}

// isDeclared says whether topic's topology was declared.
func (t *topology) isDeclared(topic string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.declared[topic]
}

// forget makes the next ensure declare topic again: the broker said its exchange is missing
// (deleted by an operator, or lost with the broker's definitions).
func (t *topology) forget(topic string) {
	t.mu.Lock()
	delete(t.declared, topic)
	t.mu.Unlock()
}
