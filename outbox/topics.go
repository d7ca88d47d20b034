package outbox

import "fmt"

// TopicRule is a broker's rule for topic names, checked by the writer at write time (with
// Config.Topics), so that an event its broker would refuse is refused in the business
// transaction rather than dead-lettered by the relay.
type TopicRule interface {
	// CheckTopic returns an error naming topic when the broker would refuse it.
	CheckTopic(topic string) error
}

// KafkaTopics is Kafka's rule: 1 to 249 letters, digits and . _ - (not "." or ".."). The
// characters ValidateTopic also allows, : and $, are refused by Kafka.
var KafkaTopics TopicRule = kafkaTopics{}

type kafkaTopics struct{}

// maxKafkaTopic is Kafka's limit on a topic name's length.
const maxKafkaTopic = 249

func (kafkaTopics) CheckTopic(topic string) error {
	if topic == "" || len(topic) > maxKafkaTopic || topic == "." || topic == ".." {
		return fmt.Errorf("topic %q: Kafka takes 1 to %d characters, not . or ..", topic, maxKafkaTopic)
	}
	for i := 0; i < len(topic); i++ {
		switch c := topic[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return fmt.Errorf("topic %q: Kafka takes only letters, digits and . _ - (not %q)", topic, c)
		}
	}
	return nil
}
