package securepulsar_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/outboxtest"
	"github.com/outboxkit/outboxkit/internal/securepulsar"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// Right token over TLS: events written to the outbox go through the forwarder and the
// brokers/pulsar publisher (role relay) to the broker, and a brokers/pulsar subscriber (role
// consumer, KeyShared) reads every one of them with its key, over TLS with hostname
// verification as well.
func TestRelayOverTLSWithToken(t *testing.T) {
	b := securepulsar.Start(t)
	db := testsupport.OpenPostgres(t)
	table := outboxtest.NewTable(t, db, "secure_pulsar")
	topic := testsupport.UniqueName("e2e")
	want := outboxtest.WriteEvents(t, db, table, topic, 30)

	sub, err := pulsar.NewSubscriber(pulsar.SubscriberConfig{
		Config:           b.Config(t, securepulsar.ConsumerRole, securepulsar.GrantedNamespace),
		SubscriptionName: testsupport.UniqueName("secure-e2e"),
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatalf("subscriber with the right token: %v", err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	msgs, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatalf("subscribe with the right token: %v", err)
	}

	pub, err := pulsar.NewPublisher(pulsar.PublisherConfig{
		Config: b.Config(t, securepulsar.RelayRole, securepulsar.GrantedNamespace),
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatalf("publisher with the right token: %v", err)
	}
	t.Cleanup(func() { _ = pub.Close() }) // after the forwarder stops (RunForwarder's cleanup runs first)
	outboxtest.RunForwarder(t, ctx, forwarder.Config{DB: db, Dialect: outbox.Postgres, Table: table, Publisher: pub})
	outboxtest.ExpectEvents(t, ctx, msgs, want, pulsar.DefaultKeyMetadata)
	// The row of the last event may still be deleted after its message arrived: bounded wait.
	for outboxtest.Count(t, db, "SELECT COUNT(*) FROM "+table) > 0 {
		if ctx.Err() != nil {
			t.Fatal("rows left in the outbox after every event arrived")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lockedBuffer collects what a logger printed, from the client's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Wrong token (signed with another key), expired token, untrusted CA, plaintext URL against
// the TLS port: the publisher (Connect, as the relay does at start) and the subscriber fail with
// an error that names the broker's address, the mechanisms (token, TLS) and the cause, and
// neither the errors nor anything logged (debug and trace included) shows a token or the key.
func TestBadCredentialsAreRefusedClearly(t *testing.T) {
	b := securepulsar.Start(t)
	right := b.Token(t, securepulsar.RelayRole, 0)
	wrong, err := securepulsar.SignToken([]byte("not-the-broker-key-0123456789abcdef"), securepulsar.RelayRole, 0)
	if err != nil {
		t.Fatal(err)
	}
	expired := b.Token(t, securepulsar.RelayRole, -time.Minute)
	never := b.Secrets(t, right, wrong, expired)
	cases := []struct {
		name   string
		change func(*pulsar.Config)
		want   []string // in the error, besides the address and the mechanisms
	}{
		{"wrong token", func(c *pulsar.Config) { c.AuthToken = wrong }, []string{"Failed to authenticate", "refused the token"}},
		{"expired token", func(c *pulsar.Config) { c.AuthToken = expired }, []string{"Failed to authenticate", "it expired at"}},
		{"untrusted certificate", func(c *pulsar.Config) { c.TLSTrustCertsFile = b.UntrustedCAFile },
			[]string{"x509: certificate signed by unknown authority", b.UntrustedCAFile}},
		{"plaintext against the TLS port", func(c *pulsar.Config) { c.URL = "pulsar://" + b.Addr() },
			[]string{"no TLS", "use pulsar+ssl://"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logged lockedBuffer
			logger := watermill.NewStdLoggerWithOut(&logged, true, true)
			check := func(side string, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("the %s connected", side)
				}
				msg := err.Error()
				t.Logf("%s error: %s", side, msg)
				for _, s := range append([]string{b.Addr(), "token authentication", "TLS"}, tc.want...) {
					if !strings.Contains(msg, s) {
						t.Errorf("the %s error does not contain %q", side, s)
					}
				}
			}
			cfg := b.Config(t, securepulsar.RelayRole, securepulsar.GrantedNamespace)
			cfg.OperationTimeout = 4 * time.Second
			tc.change(&cfg)
			pub, err := pulsar.NewPublisher(pulsar.PublisherConfig{Config: cfg}, logger)
			if err == nil {
				err = pub.Connect(testsupport.UniqueName("bad"))
				_ = pub.Close()
			}
			check("publisher", err)

			sub, err := pulsar.NewSubscriber(pulsar.SubscriberConfig{Config: cfg, SubscriptionName: "secure-bad"}, logger)
			if err == nil {
				_, err = sub.Subscribe(context.Background(), testsupport.UniqueName("bad"))
				_ = sub.Close()
			}
			check("subscriber", err)
			if logged.String() == "" {
				t.Error("nothing was logged: the scan below would prove nothing")
			}
			for _, secret := range never {
				if strings.Contains(logged.String(), secret) {
					t.Errorf("the client's log shows a token or the secret key")
				}
			}
		})
	}
}

// A role without produce permission on the topic: publishing fails with the broker's
// AuthorizationError, named with the address and the mechanisms; once produce is granted on the
// topic through the admin REST API (as the super user), the same publisher publishes.
func TestRefusedTopicFlowsOnceGranted(t *testing.T) {
	b := securepulsar.Start(t)
	topic := testsupport.UniqueName("refused")
	pub, err := pulsar.NewPublisher(pulsar.PublisherConfig{
		Config: b.Config(t, securepulsar.RelayRole, securepulsar.RefusedNamespace),
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	msg := message.NewMessage(watermill.NewUUID(), []byte(`{}`))
	err = pub.Publish(topic, msg)
	if err == nil {
		t.Fatal("the relay role published to a namespace it has no permission on")
	}
	t.Logf("error: %s", err)
	for _, s := range []string{"AuthorizationError", b.Addr(), "token authentication", "not authorized"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error does not contain %q", s)
		}
	}
	b.GrantProduce(t, securepulsar.RefusedNamespace, topic)
	// The grant reaches the broker's policy cache asynchronously: bounded retry.
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	for err = pub.Publish(topic, msg); err != nil; err = pub.Publish(topic, msg) {
		if time.Now().After(deadline) {
			t.Fatalf("publish after the grant: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
