// Package deadletter holds the forwarder's dead letters: the message of a dead event (whole, or
// reduced to its ids and the reason) and the one sequence both delivery modes follow to send
// it: whole, then reduced when the broker refuses it whole, then, when refused even reduced,
// dead in the table only. It knows neither the table nor the publisher: each delivery mode
// publishes the message its own way (alone, or in a broker transaction) and asks Next what
// follows.
package deadletter

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// Metadata keys of a dead letter, beside Watermill's poison-queue keys
// (middleware.ReasonForPoisonedKey, middleware.PoisonedTopicKey); forwarder exports them.
const (
	MetadataAttempts       = "outbox_attempts"
	MetadataPayloadDropped = "outbox_payload_dropped_bytes"
	MetadataHeadersDropped = "outbox_headers_dropped"
)

// MaxReason bounds the reason carried by a reduced dead letter, so that an error text, however
// long, cannot make it too large.
const MaxReason = 1024

// Message is the dead letter of e, carrying ctx, with Watermill's poison-queue headers (the
// reason, the original topic) and the attempts. A whole one is the event's message. A reduced
// one, for a broker that refused the whole one, keeps only the ids (event id, type, aggregate,
// tenant, created at: the message key stays the same), the reason (truncated), the attempts,
// and markers of what was dropped (MetadataPayloadDropped, the payload's size;
// MetadataHeadersDropped, the number of the event's own headers).
func Message(ctx context.Context, e outbox.Event, reason string, attempts int, reduced bool) *message.Message {
	var msg *message.Message
	if !reduced {
		msg = e.ToMessage()
	} else {
		ids := e
		ids.Payload, ids.Headers = nil, nil
		msg = ids.ToMessage()
		reason = relay.TruncateUTF8(reason, MaxReason)
		msg.Metadata.Set(MetadataPayloadDropped, strconv.Itoa(len(e.Payload)))
		msg.Metadata.Set(MetadataHeadersDropped, strconv.Itoa(len(e.Headers)))
	}
	msg.SetContext(ctx)
	msg.Metadata.Set(middleware.ReasonForPoisonedKey, reason)
	msg.Metadata.Set(middleware.PoisonedTopicKey, e.Topic)
	msg.Metadata.Set(MetadataAttempts, strconv.Itoa(attempts))
	return msg
}

// Step is what follows the publish of a dead letter.
type Step int

const (
	// Sent: the dead letter did not fail; the event is dead (or its dead letter goes in the
	// next transaction).
	Sent Step = iota
	// SendReduced: the broker refused the whole dead letter; send it reduced.
	SendReduced
	// Retry: the dead letter is not published yet, and may be later; the event is retried.
	Retry
	// Refused: the broker refused the dead letter even reduced; the event is dead in the table
	// only (RefusedReason).
	Refused
)

// Next is the dead-letter sequence, whole → reduced → refused-and-dead, written once for every
// delivery mode: what follows a dead letter (reduced or whole) that failed with err (nil when it
// did not fail), final saying whether err is a refusal for good (a permanent error, or its last
// chance: the forwarder's retry policy decides).
func Next(reduced bool, err error, final bool) Step {
	switch {
	case err == nil:
		return Sent
	case !final:
		return Retry
	case !reduced:
		return SendReduced
	}
	return Refused
}

// SpentReason is the reason carried by the dead letter of an event whose maxAttempts attempts
// are spent, sent alone after it failed once (SettleSpent). Each attempt's error was logged
// ("publish failed, will retry") and recorded in the row's last_error until then.
func SpentReason(maxAttempts int) string {
	return fmt.Sprintf("the event failed all its %d attempts (max_attempts; each one's error is in the relay's log); "+
		"its dead letter failed after the last one and was sent again alone, without publishing the event again", maxAttempts)
}

// SplitSpent takes out of records (in claim order) those whose event has used its last attempt
// (relay.RetryPolicy.Spent): only their dead letter is sent (Settler.SettleSpent, or the
// exactly-once transaction), never the event. The later records of their keys are in neither
// list: they stay pending, untouched, behind the dead letter. rest is every other record, in
// order; it is records itself when none is spent.
func SplitSpent(p relay.RetryPolicy, records []relay.Record) (spent, rest []relay.Record) {
	if !slices.ContainsFunc(records, func(r relay.Record) bool { return p.Spent(r.Attempts) }) {
		return nil, records
	}
	held := map[int64]bool{}
	rest = make([]relay.Record, 0, len(records))
	for _, r := range records {
		switch {
		case held[r.KeyHash]:
		case p.Spent(r.Attempts):
			held[r.KeyHash] = true
			spent = append(spent, r)
		default:
			rest = append(rest, r)
		}
	}
	return spent, rest
}

// SentReason is the reason recorded for an event whose dead letter the broker took: reason,
// and, when the dead letter went reduced, ReducedReason's note.
func SentReason(reason string, reduced bool) string {
	if reduced {
		return ReducedReason(reason)
	}
	return reason
}

// ReducedReason is the reason recorded for an event whose dead letter went reduced.
func ReducedReason(reason string) string {
	return reason + " (the dead letter went without the event's payload and headers: the broker refused it whole)"
}

// RetryReason is the reason recorded for an event retried because its dead letter to topic
// failed with err.
func RetryReason(reason, topic string, err error) string {
	return fmt.Sprintf("%s (dead-lettering to %s failed: %v)", reason, topic, err)
}

// RefusedReason is the reason recorded for an event dead in the table only: the broker refused
// its dead letter to topic, even reduced, with err.
func RefusedReason(reason, topic string, err error) string {
	return fmt.Sprintf("the dead letter could not be published to %s (%v); the event is dead in this table only: %s",
		topic, relay.TruncateUTF8(err.Error(), MaxReason), reason)
}
