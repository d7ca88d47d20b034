package main

import (
	"fmt"
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// `outboxkit relay` with broker: rabbitmq (the RabbitMQ of scripts/services.sh, 4 key-hash
// queues, max_message_size 1 MiB) and max_attempts: 3 (no classifier chosen by the CLI:
// brokers/rabbitmq's own decides): an event above max_message_size is a permanent error, dead at
// its first attempt, while the other keys flow; the later event of its key stays parked behind
// it, and an operator sees it in `dead-letters list`.
func TestRelayRabbitMQDeadLettersOversizedEvent(t *testing.T) {
	t.Parallel()
	relayDeadLettersOversizedEvent(t, oversizedCase{
		name:       "rpoison",
		broker:     fmt.Sprintf("broker: rabbitmq\nrabbitmq:\n  url: %s\n  partitions: 4\n  max_message_size: 1048576\n", testsupport.RabbitMQURL(t)),
		payload:    1100 << 10,
		maxAttempt: 1, // a permanent error: dead at its first attempt
	})
}

// `outboxkit relay` with broker: rabbitmq, max_attempts: 3 and max_message_size 32 MiB, above
// the server's 16 MiB (scripts/services.sh): an event of 17 MiB passes the relay's own check and
// the server refuses it by closing the channel. The relay must still respect max_attempts: the
// server's refusal names the message's size and its limit, so the event is refused for good at
// its first attempt (and its dead letter, too large as well, goes reduced), like an event above
// the relay's own max_message_size; the other keys flow and its later event stays parked.
func TestRelayRabbitMQDeadLettersAboveTheServersLimit(t *testing.T) {
	t.Parallel()
	relayDeadLettersOversizedEvent(t, oversizedCase{
		name:       "rserver",
		broker:     fmt.Sprintf("broker: rabbitmq\nrabbitmq:\n  url: %s\n  partitions: 4\n  max_message_size: 33554432\n", testsupport.RabbitMQURL(t)),
		payload:    17 << 20,
		maxAttempt: 1, // refused for good by the server: dead at its first attempt, within max_attempts 3
	})
}
