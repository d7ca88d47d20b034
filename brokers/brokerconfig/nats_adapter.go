package brokerconfig

import (
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/nats"
)

// natsEnvBindings are the OUTBOXKIT_NATS_* overrides of the nats section.
func (c *Config) natsEnvBindings() []envBinding {
	n := &c.NATS
	return []envBinding{
		{"OUTBOXKIT_NATS_URLS", "nats.urls", &n.URLs, false},
		{"OUTBOXKIT_NATS_NAME", "nats.name", &n.Name, false},
		{"OUTBOXKIT_NATS_USERNAME", "nats.username", &n.Username, false},
		{"OUTBOXKIT_NATS_PASSWORD", "nats.password", &n.Password, true},
		{"OUTBOXKIT_NATS_TOKEN", "nats.token", &n.Token, true},
		{"OUTBOXKIT_NATS_NKEY_SEED_FILE", "nats.nkey_seed_file", &n.NKeySeedFile, false},
		{"OUTBOXKIT_NATS_CREDENTIALS_FILE", "nats.credentials_file", &n.CredentialsFile, false},
		{"OUTBOXKIT_NATS_TLS_ENABLED", "nats.tls.enabled", &n.TLS.Enabled, false},
		{"OUTBOXKIT_NATS_TLS_CA_FILE", "nats.tls.ca_file", &n.TLS.CAFile, false},
		{"OUTBOXKIT_NATS_TLS_CERT_FILE", "nats.tls.cert_file", &n.TLS.CertFile, false},
		{"OUTBOXKIT_NATS_TLS_KEY_FILE", "nats.tls.key_file", &n.TLS.KeyFile, false},
		{"OUTBOXKIT_NATS_TLS_INSECURE_SKIP_VERIFY", "nats.tls.insecure_skip_verify", &n.TLS.InsecureSkipVerify, false},
		{"OUTBOXKIT_NATS_CONNECT_TIMEOUT", "nats.connect_timeout", &n.ConnectTimeout, false},
		{"OUTBOXKIT_NATS_RECONNECT_WAIT", "nats.reconnect_wait", &n.ReconnectWait, false},
		{"OUTBOXKIT_NATS_PARTITIONS", "nats.partitions", &n.Partitions, false},
		{"OUTBOXKIT_NATS_REPLICAS", "nats.replicas", &n.Replicas, false},
		{"OUTBOXKIT_NATS_DUPLICATE_WINDOW", "nats.duplicate_window", &n.DuplicateWindow, false},
		{"OUTBOXKIT_NATS_STORAGE", "nats.storage", &n.Storage, false},
		{"OUTBOXKIT_NATS_MAX_AGE", "nats.max_age", &n.MaxAge, false},
		{"OUTBOXKIT_NATS_DISABLE_STREAM_CREATION", "nats.disable_stream_creation", &n.DisableStreamCreation, false},
		{"OUTBOXKIT_NATS_KEY_METADATA", "nats.key_metadata", &n.KeyMetadata, false},
		{"OUTBOXKIT_NATS_PUBLISH_TIMEOUT", "nats.publish_timeout", &n.PublishTimeout, false},
		{"OUTBOXKIT_NATS_MAX_PENDING", "nats.max_pending", &n.MaxPending, false},
		{"OUTBOXKIT_NATS_CONSUMER_GROUP", "nats.consumer_group", &n.ConsumerGroup, false},
		{"OUTBOXKIT_NATS_ACK_WAIT", "nats.ack_wait", &n.AckWait, false},
		{"OUTBOXKIT_NATS_SUBSCRIBERS_COUNT", "nats.subscribers_count", &n.SubscribersCount, false},
		{"OUTBOXKIT_NATS_NAK_DELAY", "nats.nak_delay", &n.NakDelay, false},
		{"OUTBOXKIT_NATS_MAX_DELIVER", "nats.max_deliver", &n.MaxDeliver, false},
		{"OUTBOXKIT_NATS_CLOSE_TIMEOUT", "nats.close_timeout", &n.CloseTimeout, false},
	}
}

// buildNATS builds the NATS JetStream publisher; subscribers are made on demand, in consumer
// group group (nats.consumer_group when empty).
func buildNATS(n nats.Config, logger watermill.LoggerAdapter) (*Brokers, error) {
	pub, err := nats.NewPublisher(n, logger)
	if err != nil {
		return nil, fmt.Errorf("broker nats: %w", err)
	}
	return &Brokers{
		broker:    BrokerNATS,
		publisher: pub,
		newSub: func(group string) (message.Subscriber, error) {
			c := n
			if group != "" {
				c.ConsumerGroup = group
			}
			sub, err := nats.NewSubscriber(c, logger)
			if err != nil {
				return nil, fmt.Errorf("broker nats: %w", err)
			}
			return sub, nil
		},
	}, nil
}
