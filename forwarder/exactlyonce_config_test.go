package forwarder_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

type plainPublisher struct{}

func (plainPublisher) Publish(string, ...*message.Message) error { return nil }
func (plainPublisher) Close() error                              { return nil }

// TestExactlyOnceConfig: the delivery settings are checked, and every error names the bad value.
func TestExactlyOnceConfig(t *testing.T) {
	base := forwarder.Config{DB: &sql.DB{}, Dialect: outbox.Postgres, Publisher: plainPublisher{}}
	for _, c := range []struct {
		name   string
		modify func(*forwarder.Config)
		want   string
	}{
		{"publisher without transactions", func(c *forwarder.Config) { c.Delivery = forwarder.ExactlyOnce },
			`Delivery "exactly_once" needs a publisher with transactions (brokers/kafka); forwarder_test.plainPublisher has none`},
		{"unknown delivery", func(c *forwarder.Config) { c.Delivery = "twice" }, `Delivery "twice" is not "at_least_once" or "exactly_once"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			c.modify(&cfg)
			_, err := forwarder.New(cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}
