package main

import (
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/brokers/nats"
	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/brokers/rabbitmq"
)

// brokerTarget is a broker the outboxkit forwarder publishes to in a relay child: its publisher
// and error classifier there, and the reader the parent times a drain and the latency with.
type brokerTarget struct {
	name         string
	newPublisher func(o options) (message.Publisher, func(error) bool, error)
	newSource    func(o options, topic string) (source, error)
	// describe says, for the drain table's footnote, where the broker is and how the relay
	// writes to it.
	describe func(o options) string
}

// otherBrokerRelays are the relays that are the outboxkit forwarder on a broker other than
// Kafka, in the order of the drain table's rows.
var otherBrokerRelays = []string{relayPulsar, relayNATS, relayRabbitMQ}

// targetOf returns the broker relay publishes to: Kafka unless it is one of otherBrokerRelays.
func targetOf(relay string) brokerTarget {
	switch relay {
	case relayPulsar:
		return brokerTarget{name: "pulsar", newPublisher: pulsarPublisher, newSource: newPulsarSource,
			describe: func(o options) string {
				return fmt.Sprintf("Pulsar %s (a topic, batches built per key, no compression)", o.pulsarURL)
			}}
	case relayNATS:
		return brokerTarget{name: "nats", newPublisher: natsPublisher, newSource: newNATSSource,
			describe: func(o options) string {
				return fmt.Sprintf("NATS JetStream %s (one stream per topic, file storage)", o.natsURL)
			}}
	case relayRabbitMQ:
		return brokerTarget{name: "rabbitmq", newPublisher: rabbitMQPublisher, newSource: newRabbitMQSource,
			describe: func(o options) string {
				return fmt.Sprintf("RabbitMQ %s (a queue per topic, persistent messages, publisher confirms)", redactedURL(o.rabbitMQ))
			}}
	}
	return brokerTarget{name: "kafka", newPublisher: kafkaPublisher, newSource: newKafkaSource,
		describe: func(o options) string { return fmt.Sprintf("Kafka %v", o.brokers) }}
}

// relayPublisher returns the publisher of a relay child and its error classifier.
func relayPublisher(role string, o options) (message.Publisher, func(error) bool, error) {
	t := targetOf(role)
	pub, retriable, err := t.newPublisher(o)
	if err != nil {
		return nil, nil, fmt.Errorf("%s publisher: %w", t.name, err)
	}
	return pub, retriable, nil
}

// newSource returns the reader of topic on the broker relay publishes to.
func newSource(relay string, o options, topic string) (source, error) {
	t := targetOf(relay)
	src, err := t.newSource(o, topic)
	if err != nil {
		return nil, fmt.Errorf("%s consumer of %s: %w", t.name, topic, err)
	}
	return src, nil
}

func kafkaPublisher(o options) (message.Publisher, func(error) bool, error) {
	pub, err := kafka.NewPublisher(kafka.Config{Brokers: o.brokers, Compression: o.compress}, nil)
	return pub, kafka.Retriable, err
}

func pulsarPublisher(o options) (message.Publisher, func(error) bool, error) {
	pub, err := pulsar.NewPublisher(pulsar.PublisherConfig{Config: pulsar.Config{URL: o.pulsarURL}}, nil)
	return pub, pulsar.Retriable, err
}

func natsPublisher(o options) (message.Publisher, func(error) bool, error) {
	pub, err := nats.NewPublisher(nats.Config{URLs: []string{o.natsURL}}, nil)
	return pub, nats.Retriable, err
}

func rabbitMQPublisher(o options) (message.Publisher, func(error) bool, error) {
	pub, err := rabbitmq.NewPublisher(rabbitmq.Config{URL: o.rabbitMQ}, nil)
	return pub, rabbitmq.Retriable, err
}
