package nats

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalidTopic marks a topic that is not a valid NATS subject for publishing (empty, with
// whitespace, a wildcard '*' or '>', or an empty token). Retriable reports false for it.
var ErrInvalidTopic = errors.New("nats: invalid topic")

// checkTopic returns why topic cannot be published to, or nil.
func checkTopic(topic string) error {
	if topic == "" {
		return fmt.Errorf("%w: empty", ErrInvalidTopic)
	}
	if strings.ContainsAny(topic, " \t\r\n*>") {
		return fmt.Errorf("%w %q: whitespace and the wildcards '*' and '>' are not allowed", ErrInvalidTopic, topic)
	}
	for _, token := range strings.Split(topic, ".") {
		if token == "" {
			return fmt.Errorf("%w %q: empty subject token (leading, trailing or double '.')", ErrInvalidTopic, topic)
		}
	}
	return nil
}

// StreamName is the name of the stream holding topic: the topic with every character a stream
// name cannot hold ('.', '*', '>', '/', '\', whitespace) replaced by '_'. Two topics that differ
// only there ("orders.eu" and "orders_eu") would share a name: the second one's stream cannot
// be created and its publishes fail, naming the stream.
func StreamName(topic string) string {
	return strings.Map(func(r rune) rune {
		if strings.ContainsRune(".*>/\\ \t\r\n", r) {
			return '_'
		}
		return r
	}, topic)
}

// validName reports whether s can be a stream or consumer name.
func validName(s string) bool { return s != "" && StreamName(s) == s }

// DefaultDeadLetterTopic is the forwarder's default dead-letter topic
// (forwarder.DefaultDeadLetterTopic): always one of Config.DeadLetterTopics.
const DefaultDeadLetterTopic = "outboxkit.dead_letters"

// deadLetterTopic reports whether topic is one of DeadLetterTopics (or the default one).
func (c Config) deadLetterTopic(topic string) bool {
	return topic == DefaultDeadLetterTopic || slices.Contains(c.DeadLetterTopics, topic)
}

// partitions is the number of partition subjects of topic: Partitions, but at least 1 for a
// dead-letter topic (0: the topic is one subject, its own name).
func (c Config) partitions(topic string) int {
	if c.deadLetterTopic(topic) {
		return max(c.Partitions, 1)
	}
	return c.Partitions
}

// filterSubject is the subject (pattern) the stream of topic holds, and the one subscribers
// consume: the topic itself, or <topic>.* with partitions (always for a dead-letter topic).
func (c Config) filterSubject(topic string) string {
	if c.partitions(topic) == 0 {
		return topic
	}
	return topic + ".*"
}

// Subject is the subject a message with partition key key is published to on topic: the topic
// itself, or with Partitions N > 0, <topic>.<p> where p = FNV-1a 32 of the key modulo N. A
// dead-letter topic (Config.DeadLetterTopics) has at least one partition: <topic>.0 with
// Partitions 0.
func (c Config) Subject(topic, key string) string {
	n := c.partitions(topic)
	if n == 0 {
		return topic
	}
	return topic + "." + strconv.Itoa(Partition(key, n))
}

// Partition is the partition of key among n: FNV-1a (32 bits) of the key, modulo n.
func Partition(key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}
