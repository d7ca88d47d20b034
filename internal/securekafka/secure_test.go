package securekafka_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/outboxtest"
	"github.com/outboxkit/outboxkit/internal/securekafka"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// Right credentials: events written to the outbox go through the forwarder and its franz-go
// publisher (user relay) to the SASL_SSL broker, and a watermill-kafka subscriber (Sarama, user
// consumer, consumer group) reads every one of them with its key, over SASL_SSL as well.
func TestRelayOverSASLSSL(t *testing.T) {
	b := securekafka.Start(t)
	db := testsupport.OpenPostgres(t)
	table := outboxtest.NewTable(t, db, "secure")
	topic := testsupport.UniqueName(securekafka.GrantedPrefix + "e2e")
	want := outboxtest.WriteEvents(t, db, table, topic, 30)

	pub, err := kafka.NewPublisher(b.Config(t, securekafka.RelayUser), watermill.NopLogger{})
	if err != nil {
		t.Fatalf("publisher with the right credentials: %v", err)
	}
	t.Cleanup(func() { _ = pub.Close() }) // after the forwarder stops (RunForwarder's cleanup runs first)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	outboxtest.RunForwarder(t, ctx, forwarder.Config{
		DB: db, Dialect: outbox.Postgres, Table: table, Publisher: pub, IsRetriable: kafka.Retriable,
	})

	cfg := b.Config(t, securekafka.ConsumerUser)
	cfg.ConsumerGroup = testsupport.UniqueName(securekafka.GroupPrefix + "e2e")
	sub, err := kafka.NewSubscriber(cfg, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// The consumer may not create topics: wait for the relay to have published (and so created)
	// it before subscribing. Bounded, not a timing assertion.
	for outboxtest.Count(t, db, "SELECT COUNT(*) FROM "+table) > 0 && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	msgs, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	outboxtest.ExpectEvents(t, ctx, msgs, want, kafka.DefaultKeyMetadata)
}

// Bad credentials or a bad TLS setup: the publisher fails at once with an error that names the
// broker's address and the mechanism, and never shows a password.
func TestBadCredentialsAreRefusedClearly(t *testing.T) {
	b := securekafka.Start(t)
	right := b.Password(t, securekafka.RelayUser)
	const wrongPassword = "not-the-relay-password-7f3a"
	cases := []struct {
		name   string
		change func(*kafka.Config)
		want   string // in the error, besides the address and the mechanism
	}{
		{"wrong password", func(c *kafka.Config) { c.SASL.Password = wrongPassword }, "SASL_AUTHENTICATION_FAILED"},
		{"untrusted certificate", func(c *kafka.Config) { c.TLS.CAFile = b.UntrustedCAFile }, "x509"},
		{"plaintext against the TLS port", func(c *kafka.Config) { c.TLS = kafka.TLSConfig{} }, "speaking to a tls endpoint"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := b.Config(t, securekafka.RelayUser)
			tc.change(&cfg)
			pub, err := kafka.NewPublisher(cfg, watermill.NopLogger{})
			if err == nil {
				_ = pub.Close()
				t.Fatal("the publisher connected")
			}
			msg := err.Error()
			t.Logf("error: %s", msg)
			for _, s := range []string{b.Addr, securekafka.Mechanism, tc.want} {
				if !strings.Contains(msg, s) {
					t.Errorf("the error does not contain %q", s)
				}
			}
			for _, secret := range []string{right, wrongPassword} {
				if strings.Contains(msg, secret) {
					t.Errorf("the error shows a password")
				}
			}
		})
	}
}
