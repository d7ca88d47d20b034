package brokerconfig

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
)

func (p PulsarConfig) connection() pulsar.Config {
	return pulsar.Config{
		URL:                         p.URL,
		AuthToken:                   p.AuthToken,
		AuthTokenFile:               p.AuthTokenFile,
		TLSTrustCertsFile:           p.TLSTrustCertsFile,
		TLSAllowInsecureConnection:  p.TLSAllowInsecureConnection,
		TLSSkipHostnameVerification: p.TLSSkipHostnameVerification,
		TLSCertFile:                 p.TLSCertFile,
		TLSKeyFile:                  p.TLSKeyFile,
		OperationTimeout:            p.OperationTimeout,
		ConnectionTimeout:           p.ConnectionTimeout,
		Tenant:                      p.Tenant,
		Namespace:                   p.Namespace,
	}
}

// PublisherConfig returns the brokers/pulsar publisher configuration of this section.
func (p PulsarConfig) PublisherConfig() pulsar.PublisherConfig {
	return pulsar.PublisherConfig{
		Config:                  p.connection(),
		KeyMetadata:             p.KeyMetadata,
		SendTimeout:             p.SendTimeout,
		MaxPendingMessages:      p.MaxPendingMessages,
		DisableBatching:         p.DisableBatching,
		BatchingMaxPublishDelay: p.BatchingMaxPublishDelay,
		BatchingMaxMessages:     p.BatchingMaxMessages,
		BatchingMaxSize:         p.BatchingMaxSize,
		MixedKeyBatches:         p.MixedKeyBatches,
		Compression:             pulsar.Compression(p.Compression),
	}
}

// SubscriberConfig returns the brokers/pulsar subscriber configuration of this section, in
// subscription (the configured subscription_name when empty).
func (p PulsarConfig) SubscriberConfig(subscription string) pulsar.SubscriberConfig {
	if subscription == "" {
		subscription = p.SubscriptionName
	}
	sc := pulsar.SubscriberConfig{
		Config:              p.connection(),
		SubscriptionName:    subscription,
		SubscriptionType:    pulsar.SubscriptionType(p.SubscriptionType),
		InitialPosition:     pulsar.InitialPosition(p.InitialPosition),
		NackRedeliveryDelay: p.NackRedeliveryDelay,
		ReceiverQueueSize:   p.ReceiverQueueSize,
		ConsumerName:        p.ConsumerName,
	}
	if p.DeadLetter != nil {
		sc.DeadLetter = &pulsar.DeadLetterPolicy{MaxDeliveries: p.DeadLetter.MaxDeliveries, Topic: p.DeadLetter.Topic}
	}
	return sc
}

// validatePulsarAdapter runs brokers/pulsar's own validation and renames the Go field it
// names to the YAML key (the fields of PulsarConfig have the same Go names). The subscription
// name is checked only when one is configured: a publish-only relay needs none, and
// Brokers.NewSubscriber checks the name it is given.
func validatePulsarAdapter(p PulsarConfig) error {
	if err := p.PublisherConfig().Validate(); err != nil {
		return yamlFieldError(err)
	}
	sub := "placeholder"
	if p.SubscriptionName != "" {
		sub = p.SubscriptionName
	}
	if err := p.SubscriberConfig(sub).Validate(); err != nil {
		return yamlFieldError(err)
	}
	return nil
}

// yamlFieldError prefixes err with the YAML key of the PulsarConfig field its message starts with.
func yamlFieldError(err error) error {
	msg := err.Error()
	end := strings.IndexAny(msg, " :.")
	if end < 0 {
		end = len(msg)
	}
	if f, ok := reflect.TypeOf(PulsarConfig{}).FieldByName(msg[:end]); ok {
		key := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if strings.HasPrefix(msg[end:], ".MaxDeliveries") {
			key += ".max_deliveries"
		} else if strings.HasPrefix(msg[end:], ".Topic") {
			key += ".topic"
		}
		return fmt.Errorf("%s: %w", key, err)
	}
	return fmt.Errorf("(pulsar adapter): %w", err)
}

func buildPulsar(_ context.Context, p PulsarConfig, logger watermill.LoggerAdapter) (*Brokers, error) {
	pub, err := pulsar.NewPublisher(p.PublisherConfig(), logger)
	if err != nil {
		return nil, fmt.Errorf("broker pulsar: %w", err)
	}
	return &Brokers{
		broker:    BrokerPulsar,
		publisher: pub,
		newSub: func(subscription string) (message.Subscriber, error) {
			sub, err := pulsar.NewSubscriber(p.SubscriberConfig(subscription), logger)
			if err != nil {
				return nil, fmt.Errorf("broker pulsar: %w", err)
			}
			return sub, nil
		},
	}, nil
}
