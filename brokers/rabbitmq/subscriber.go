package rabbitmq

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	wmamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Subscriber is a Watermill message.Subscriber for RabbitMQ: watermill-amqp v3's subscriber on
// the queues of this package. Subscribe(topic) consumes the queues of the topic for
// Config.ConsumerGroup (one queue, or one per partition, merged into one channel: the order of
// each queue, so of each key, is kept), declaring and binding them unless
// Config.DisableTopology. Queues have single-active-consumer: of the subscribers of one group,
// one at a time reads a queue, the others take over when it goes. Ack is an AMQP ack, Nack an
// AMQP nack with requeue; with prefetch 1 a nacked message is the next one delivered.
type Subscriber struct {
	config Config
	inner  *wmamqp.Subscriber
	routes *sync.Map // watermill-amqp topic (a queue name) -> route
}

// route is where a queue consumed by the inner subscriber is bound.
type route struct{ exchange, routingKey string }

var _ message.Subscriber = (*Subscriber)(nil)

// NewSubscriber validates config, fills its defaults and connects.
func NewSubscriber(config Config, logger watermill.LoggerAdapter) (*Subscriber, error) {
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	config.SetDefaults()
	if err := config.Validate(); err != nil {
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	routes := &sync.Map{}
	wc, err := config.watermillConfig(routes)
	if err != nil {
		return nil, err
	}
	inner, err := wmamqp.NewSubscriber(wc, logger)
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: connect to %s: %w", redactURL(config.URL), scrubError(err, config))
	}
	return &Subscriber{config: config, inner: inner, routes: routes}, nil
}

// watermillConfig is watermill-amqp's configuration for this one: the inner subscriber's topic
// is a queue name, mapped to its exchange and routing key by routes.
func (c Config) watermillConfig(routes *sync.Map) (wmamqp.Config, error) {
	ac, err := c.amqpConfig()
	if err != nil {
		return wmamqp.Config{}, err
	}
	lookup := func(queue string) route {
		r, _ := routes.Load(queue)
		rt, _ := r.(route)
		return rt
	}
	var builder wmamqp.TopologyBuilder = &wmamqp.DefaultTopologyBuilder{}
	if c.DisableTopology {
		builder = noTopology{}
	}
	return wmamqp.Config{
		Connection: wmamqp.ConnectionConfig{AmqpURI: strings.TrimSpace(c.URL), AmqpConfig: &ac, Reconnect: wmamqp.DefaultReconnectConfig()},
		Marshaler:  wmamqp.DefaultMarshaler{},
		Exchange: wmamqp.ExchangeConfig{GenerateName: func(queue string) string { return lookup(queue).exchange },
			Type: amqp.ExchangeDirect, Durable: true},
		Queue: wmamqp.QueueConfig{GenerateName: wmamqp.GenerateQueueNameTopicName, Durable: true,
			Arguments: c.queueArgs()},
		QueueBind: wmamqp.QueueBindConfig{GenerateRoutingKey: func(queue string) string { return lookup(queue).routingKey }},
		Consume:   wmamqp.ConsumeConfig{Qos: wmamqp.QosConfig{PrefetchCount: 1}},
		// Not used (this Subscriber publishes nothing), but watermill-amqp validates it.
		Publish:         wmamqp.PublishConfig{GenerateRoutingKey: func(string) string { return "" }},
		TopologyBuilder: builder,
	}, nil
}

// noTopology declares nothing: Config.DisableTopology.
type noTopology struct{}

func (noTopology) BuildTopology(*amqp.Channel, wmamqp.BuildTopologyParams, wmamqp.Config, watermill.LoggerAdapter) error {
	return nil
}

func (noTopology) ExchangeDeclare(*amqp.Channel, string, wmamqp.Config) error { return nil }

// queues registers the queues of topic for the consumer group and returns them.
func (s *Subscriber) queues(topic string) []string {
	keys := s.config.routingKeys(topic)
	queues := make([]string, len(keys))
	for i, key := range keys {
		queues[i] = QueueName(key, s.config.ConsumerGroup)
		s.routes.Store(queues[i], route{exchange: topic, routingKey: key})
	}
	return queues
}

// Subscribe declares the queues of topic for the consumer group (unless
// Config.DisableTopology) and consumes them until ctx is done or the subscriber is closed.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	queues := s.queues(topic)
	if len(queues) == 1 {
		return s.inner.Subscribe(ctx, queues[0])
	}
	out := make(chan *message.Message)
	var wg sync.WaitGroup
	for _, q := range queues {
		in, err := s.inner.Subscribe(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("rabbitmq: subscribe to queue %s: %w", q, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for msg := range in {
				select {
				case out <- msg:
				case <-ctx.Done():
					msg.Nack() // requeued; the queue's next consumer gets it first
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(out)
	}()
	return out, nil
}

// SubscribeInitialize declares the queues of topic for the consumer group (unless
// Config.DisableTopology), so that they keep what is published before the first Subscribe.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	if err := checkTopic(topic); err != nil {
		return err
	}
	for _, q := range s.queues(topic) {
		if err := s.inner.SubscribeInitialize(q); err != nil {
			return fmt.Errorf("rabbitmq: declare queue %s: %w", q, err)
		}
	}
	return nil
}

// Close stops the subscriptions (a message handed out and not acked is requeued) and closes
// the connection.
func (s *Subscriber) Close() error { return s.inner.Close() }
