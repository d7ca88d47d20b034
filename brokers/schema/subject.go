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
