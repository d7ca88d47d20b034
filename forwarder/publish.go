package forwarder

import (
	"log/slog"

	"github.com/outboxkit/outboxkit/forwarder/internal/deadletter"
	"github.com/outboxkit/outboxkit/forwarder/internal/waves"
)

// MetadataHeadersDropped is set on a dead letter sent without the event's own headers (the
// broker refused it with them); its value is how many headers were dropped. The headers stay in
// the outbox row for a replay.
const MetadataHeadersDropped = deadletter.MetadataHeadersDropped

// outcomePublisher is the publisher strategy, chosen once: a publisher that reports outcomes
// per message (OutcomePublisher) is used as it is; any other is published through in waves
// (internal/waves), one event per key per call.
func outcomePublisher(c Config, log *slog.Logger) OutcomePublisher {
	if pub, ok := c.Publisher.(OutcomePublisher); ok {
		return pub
	}
	return waves.New(c.Publisher, c.IsRetriable, log)
}
