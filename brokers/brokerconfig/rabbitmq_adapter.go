package brokerconfig

import (
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/rabbitmq"
)

// rabbitMQEnvBindings are the OUTBOXKIT_RABBITMQ_* overrides of the rabbitmq section (the URL's
// is OUTBOXKIT_RABBITMQ_AMQP_URL).
func (c *Config) rabbitMQEnvBindings() []envBinding {
	r := &c.RabbitMQ
	return []envBinding{
		{"OUTBOXKIT_RABBITMQ_AMQP_URL", "rabbitmq.url", &r.URL, true},
		{"OUTBOXKIT_RABBITMQ_USERNAME", "rabbitmq.username", &r.Username, false},
		{"OUTBOXKIT_RABBITMQ_PASSWORD", "rabbitmq.password", &r.Password, true},
		{"OUTBOXKIT_RABBITMQ_TLS_CA_FILE", "rabbitmq.tls.ca_file", &r.TLS.CAFile, false},
		{"OUTBOXKIT_RABBITMQ_TLS_CERT_FILE", "rabbitmq.tls.cert_file", &r.TLS.CertFile, false},
		{"OUTBOXKIT_RABBITMQ_TLS_KEY_FILE", "rabbitmq.tls.key_file", &r.TLS.KeyFile, false},
		{"OUTBOXKIT_RABBITMQ_TLS_SERVER_NAME", "rabbitmq.tls.server_name", &r.TLS.ServerName, false},
		{"OUTBOXKIT_RABBITMQ_TLS_INSECURE_SKIP_VERIFY", "rabbitmq.tls.insecure_skip_verify", &r.TLS.InsecureSkipVerify, false},
		{"OUTBOXKIT_RABBITMQ_CONNECTION_NAME", "rabbitmq.connection_name", &r.ConnectionName, false},
		{"OUTBOXKIT_RABBITMQ_CONNECT_TIMEOUT", "rabbitmq.connect_timeout", &r.ConnectTimeout, false},
		{"OUTBOXKIT_RABBITMQ_HEARTBEAT", "rabbitmq.heartbeat", &r.Heartbeat, false},
		{"OUTBOXKIT_RABBITMQ_PARTITIONS", "rabbitmq.partitions", &r.Partitions, false},
		{"OUTBOXKIT_RABBITMQ_QUEUE_TYPE", "rabbitmq.queue_type", &r.QueueType, false},
		{"OUTBOXKIT_RABBITMQ_DISABLE_TOPOLOGY", "rabbitmq.disable_topology", &r.DisableTopology, false},
		{"OUTBOXKIT_RABBITMQ_KEY_METADATA", "rabbitmq.key_metadata", &r.KeyMetadata, false},
		{"OUTBOXKIT_RABBITMQ_PUBLISH_TIMEOUT", "rabbitmq.publish_timeout", &r.PublishTimeout, false},
		{"OUTBOXKIT_RABBITMQ_MAX_MESSAGE_SIZE", "rabbitmq.max_message_size", &r.MaxMessageSize, false},
		{"OUTBOXKIT_RABBITMQ_CHANNEL_POOL", "rabbitmq.channel_pool", &r.ChannelPool, false},
		{"OUTBOXKIT_RABBITMQ_CONSUMER_GROUP", "rabbitmq.consumer_group", &r.ConsumerGroup, false},
		{"OUTBOXKIT_RABBITMQ_CLOSE_TIMEOUT", "rabbitmq.close_timeout", &r.CloseTimeout, false},
	}
}

// buildRabbitMQ builds the RabbitMQ publisher; subscribers are made on demand, in consumer
// group group (rabbitmq.consumer_group when empty).
func buildRabbitMQ(r rabbitmq.Config, logger watermill.LoggerAdapter) (*Brokers, error) {
	pub, err := rabbitmq.NewPublisher(r, logger)
	if err != nil {
		return nil, fmt.Errorf("broker rabbitmq: %w", err)
	}
	return &Brokers{
		broker:    BrokerRabbitMQ,
		publisher: pub,
		newSub: func(group string) (message.Subscriber, error) {
			c := r
			if group != "" {
				c.ConsumerGroup = group
			}
			sub, err := rabbitmq.NewSubscriber(c, logger)
			if err != nil {
				return nil, fmt.Errorf("broker rabbitmq: %w", err)
			}
			return sub, nil
		},
	}, nil
}
