// Package cloudevents makes outboxkit's messages CloudEvents 1.0 in binary content mode: a
// message.Publisher decorator adds the ce_* attributes (id, type, source, subject, time,
// specversion) and the content-type, derived from the outbox metadata, before the wrapped
// publisher sends them. brokers/kafka turns metadata into Kafka headers, as the CloudEvents Kafka
// protocol binding reads them; brokers/pulsar turns it into Pulsar properties under the same names.
package cloudevents

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
)

// Config configures the CloudEvents attributes that do not come from the event itself.
type Config struct {
	// Source is the ce_source attribute of every event, the context in which the events
	// happened: a URI-reference (RFC 3986) such as "/billing", "urn:example:billing" or
	// "https://example.com/billing". Required. Together with the event id it identifies an
	// event, so give every producing service its own.
	Source string `yaml:"source"`
}

// Validate reports a missing or malformed Source, naming the value.
func (c Config) Validate() error {
	if c.Source == "" {
		return errors.New("source: missing (a URI-reference such as /billing or https://example.com/billing)")
	}
	if err := checkURIReference(c.Source); err != nil {
		return fmt.Errorf("source: %q is not a URI-reference: %w", c.Source, err)
	}
	return nil
}

// LogValue implements slog.LogValuer.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(slog.String("source", c.Source))
}

// checkURIReference accepts the strings RFC 3986 allows as a URI-reference: only unreserved,
// reserved and percent-encoded characters, and a structure net/url parses (which also checks
// the percent-encodings and the port).
func checkURIReference(s string) error {
	for i := 0; i < len(s); i++ {
		if !uriChar(s[i]) {
			return fmt.Errorf("character %q at offset %d is not allowed (percent-encode it)", s[i], i)
		}
	}
	if _, err := url.Parse(s); err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return err
	}
	return nil
}

// uriChar reports whether c is an unreserved, reserved or percent character of RFC 3986.
func uriChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~:/?#[]@!$&'()*+,;=%", c) >= 0
}
