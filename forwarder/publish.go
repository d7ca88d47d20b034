package forwarder

import (
	"log/slog"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder/internal/deadletter"
	"github.com/outboxkit/outboxkit/forwarder/internal/waves"
)

// MetadataHeadersDropped is set on a dead letter sent without the event's own headers (the
// broker refused it with them); its value is how many headers were dropped. The headers stay in
// the outbox row for a replay.
const MetadataHeadersDropped = deadletter.MetadataHeadersDropped

// OutcomePublisherOf returns pub as the forwarder publishes through it; New calls it once, and
// this is the forwarder's one choice of a publisher strategy. A publisher that reports outcomes
// per message, an OutcomePublisher, is used as it is. Any other Watermill publisher is wrapped in
// the waves (forwarder/internal/waves on package keyorder): one event per key per Publish call,
// the next event of a key sent once the previous one is acknowledged, a failed call's events
// published one by one to find the failing ones, a permanent failure confirmed alone, and a
// key's later events held back after its failure. isRetriable classifies pub's errors as
// Config.IsRetriable does (nil: pub's own ErrorClassifier, or every error retriable); log (nil:
// discarded) receives the isolation of failed calls at debug level.
//
// A broker's test runs forwarder/outcometest against OutcomePublisherOf(pub, nil, nil) to check
// the path the forwarder takes with pub; the wrapped publisher also has Close and Retriable.
func OutcomePublisherOf(pub message.Publisher, isRetriable func(error) bool, log *slog.Logger) OutcomePublisher {
	if each, ok := pub.(OutcomePublisher); ok {
		return each
	}
	if isRetriable == nil {
		isRetriable = defaultClassifier(pub)
	}
	return waves.New(pub, isRetriable, log)
}
