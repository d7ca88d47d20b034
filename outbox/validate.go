package outbox

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// ErrInvalidEvent is wrapped by every event validation error.
var ErrInvalidEvent = errors.New("invalid event")

// ErrInvalidIdentifier is wrapped by every rejected SQL identifier.
var ErrInvalidIdentifier = errors.New("invalid SQL identifier")

// DefaultMaxPayloadBytes is the default payload limit: just under Kafka's default
// message.max.bytes (1 MiB), leaving room for headers.
const DefaultMaxPayloadBytes = 900 * 1024

// MaxHeadersBytes bounds the total size of an event's headers (names and values) that the Writer
// accepts: 64 KiB, well under Kafka's default message limit (1 MiB) and Pulsar's (5 MiB), so
// that the headers alone never make an event, or its dead letter, too large for the broker.
const MaxHeadersBytes = 64 << 10

// maxTextField bounds topic, aggregate, event-type and tenant values (the columns are VARCHAR(255)
// on MySQL).
const maxTextField = 255

// Validate checks the event before any SQL runs. maxPayloadBytes <= 0 disables the size check.
// The error wraps ErrInvalidEvent and names the event and the bad field.
func (e Event) Validate(maxPayloadBytes int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %s (type %q, aggregate %q): %s", ErrInvalidEvent, e.ID, e.EventType, e.AggregateID,
			fmt.Sprintf(format, args...))
	}
	for _, f := range []struct{ name, value string }{
		{"topic", e.Topic}, {"aggregate id", e.AggregateID}, {"event type", e.EventType},
	} {
		if f.value == "" {
			return bad("missing %s", f.name)
		}
	}
	for _, f := range []struct{ name, value string }{
		{"topic", e.Topic}, {"aggregate type", e.AggregateType}, {"aggregate id", e.AggregateID},
		{"event type", e.EventType}, {"tenant id", e.TenantID},
	} {
		if len(f.value) > maxTextField {
			return bad("%s is %d bytes, the limit is %d", f.name, len(f.value), maxTextField)
		}
	}
	if err := ValidateTopic(e.Topic); err != nil {
		return bad("%v", err)
	}
	if y := e.CreatedAt.UTC().Year(); !e.CreatedAt.IsZero() && (y < 1 || y > 9999) {
		return bad("created at %s: the year must be between 1 and 9999", e.CreatedAt.UTC().Format(time.RFC3339))
	}
	if y := e.DeliverAt.UTC().Year(); !e.DeliverAt.IsZero() && (y < 1 || y > 9999) {
		return bad("deliver at %s: the year must be between 1 and 9999", e.DeliverAt.UTC().Format(time.RFC3339))
	}
	if maxPayloadBytes > 0 && len(e.Payload) > maxPayloadBytes {
		return bad("payload is %d bytes, the limit is %d", len(e.Payload), maxPayloadBytes)
	}
	return e.validateHeaders(bad)
}

// validateHeaders checks the header names and their total size.
func (e Event) validateHeaders(bad func(format string, args ...any) error) error {
	size := 0
	for name, value := range e.Headers {
		if owner := reservedBy(name); owner != "" {
			return bad("header %q is reserved by %s", name, owner)
		}
		if !validHeaderName(name) {
			return bad("header name %q must be 1-255 printable ASCII characters without spaces", name)
		}
		size += len(name) + len(value)
	}
	if size > MaxHeadersBytes {
		return bad("headers are %d bytes (names and values), the limit is %d (outbox.MaxHeadersBytes)", size, MaxHeadersBytes)
	}
	return nil
}

// ValidateTopic accepts a topic name watermill-sql accepts: 1 to 255 letters, digits and
// . _ - : $. Brokers may take fewer (Kafka refuses : and $ and names over 249 characters): give
// the writer the broker's rule with Config.Topics (KafkaTopics) to refuse those at write time.
func ValidateTopic(topic string) error {
	if topic == "" || len(topic) > maxTextField || !validTopicChars(topic) {
		return fmt.Errorf("topic %q may only contain letters, digits and . _ - : $ (1 to %d characters)", topic, maxTextField)
	}
	return nil
}

// validTopicChars reports whether topic holds only what both brokers and watermill-sql accept
// in a topic name: letters, digits and . _ - : $ (a loop, not a regexp: it runs for every event).
func validTopicChars(topic string) bool {
	for i := 0; i < len(topic); i++ {
		switch c := topic[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '_', c == '-', c == ':', c == '$':
		default:
			return false
		}
	}
	return true
}

// validHeaderName: 1 to 255 printable ASCII characters except space, as Kafka headers and Pulsar
// properties expect.
func validHeaderName(name string) bool {
	if name == "" || len(name) > 255 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x21 || name[i] > 0x7e {
			return false
		}
	}
	return true
}

// identifierPattern: a plain SQL identifier, optionally schema-qualified.
var identifierPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// maxIdentifier leaves room for the suffixes of derived names (PostgreSQL's limit is 63).
const maxIdentifier = 48

// maxIdentifierPart is PostgreSQL's identifier limit (NAMEDATALEN-1), the smallest of the three
// databases (MySQL allows 64 characters, SQLite has no limit).
const maxIdentifierPart = 63

// ValidateIdentifier accepts a table name made of letters, digits and underscores, optionally
// schema-qualified ("app.outbox"), at most 48 characters so derived index and table names fit
// every dialect. Anything else is rejected: table names are never quoted or escaped, only checked.
// It is the one identifier check of outboxkit: the outbox, the forwarder and the inbox use it.
func ValidateIdentifier(name string) error {
	if err := checkIdentifier(name, maxIdentifier); err != nil {
		return err
	}
	return checkReserved(name)
}

// checkIdentifier checks the shape of name, its length (at most maxLen characters) and the length
// of each of its parts (at most 63). Derived names ("<table>_migrations") are checked with a
// larger maxLen than the names users choose.
func checkIdentifier(name string, maxLen int) error {
	if name == "" {
		return fmt.Errorf("%w: empty table name", ErrInvalidIdentifier)
	}
	if len(name) > maxLen {
		return fmt.Errorf("%w %q: longer than %d characters", ErrInvalidIdentifier, name, maxLen)
	}
	if !identifierPattern.MatchString(name) {
		return fmt.Errorf("%w %q: use letters, digits and underscores, optionally schema.table", ErrInvalidIdentifier, name)
	}
	for part := range strings.SplitSeq(name, ".") {
		if len(part) > maxIdentifierPart {
			return fmt.Errorf("%w %q: %q is longer than %d characters", ErrInvalidIdentifier, name, part, maxIdentifierPart)
		}
	}
	return nil
}
