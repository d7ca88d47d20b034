package schema

import (
	"fmt"

	"github.com/outboxkit/outboxkit/outbox"
)

// eventTypeKey is the metadata that names an event's record for the record strategies.
const eventTypeKey = outbox.MetadataEventType

// Strategy is a subject name strategy: how an event's subject is named, as Confluent's
// serializers name it.
type Strategy string

// The subject name strategies.
const (
	// StrategyTopic names the subject <topic>-value: one schema per topic (the default).
	StrategyTopic Strategy = "topic"
	// StrategyRecord names the subject by the event's record name, its event_type metadata
	// (an Avro record's or Protobuf message's full name): one schema per event type, in any topic.
	StrategyRecord Strategy = "record"
	// StrategyTopicRecord names the subject <topic>-<event_type>: one schema per event type
	// and topic.
	StrategyTopicRecord Strategy = "topic_record"
)

// Validate reports an unknown strategy, naming it; "" is the default (topic).
func (s Strategy) Validate() error {
	switch s {
	case "", StrategyTopic, StrategyRecord, StrategyTopicRecord:
		return nil
	}
	return fmt.Errorf("subject strategy %q: want %s, %s or %s", string(s), StrategyTopic, StrategyRecord, StrategyTopicRecord)
}

// subject names the subject of an event of type eventType in topic; false when the strategy
// needs the event type and it is empty.
func (s Strategy) subject(topic, eventType string) (string, bool) {
	switch s {
	case StrategyRecord:
		return eventType, eventType != ""
	case StrategyTopicRecord:
		return topic + "-" + eventType, eventType != ""
	default:
		return Subject(topic), true
	}
}

// TopicConfig is the schema of one topic's events, overriding the Encoder's default (YAML
// schema_registry.topics.<topic>).
type TopicConfig struct {
	// Subject names the subject outright (for example shop.v1.Order), whatever the event; it
	// excludes Strategy.
	Subject string `yaml:"subject"`
	// Strategy names the subject by a strategy other than the default one.
	Strategy Strategy `yaml:"subject_strategy"`
	// Version is the subject version to encode with; 0 means the latest (not the default's
	// version: a topic entry says its own).
	Version int `yaml:"version"`
	// Register overrides the default of whether the relay may register the subject's
	// configured schema when the registry has none (nil: the default's).
	Register *bool `yaml:"register"`
}

func (t TopicConfig) validate() error {
	if t.Subject != "" && t.Strategy != "" {
		return fmt.Errorf("subject %q and subject_strategy %q: set one", t.Subject, string(t.Strategy))
	}
	if t.Version < 0 {
		return fmt.Errorf("version: %d: want 0 (latest) or a version number from 1", t.Version)
	}
	return t.Strategy.Validate()
}

// String prints the entry with register's value (not its pointer).
func (t TopicConfig) String() string {
	register := "default"
	if t.Register != nil {
		register = fmt.Sprint(*t.Register)
	}
	return fmt.Sprintf("{subject:%q subject_strategy:%q version:%d register:%s}", t.Subject, string(t.Strategy), t.Version, register)
}
