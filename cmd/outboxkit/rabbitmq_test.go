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
