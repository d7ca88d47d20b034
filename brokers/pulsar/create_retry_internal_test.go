package pulsar

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// errPooledConnectionClosed is what pulsar-client-go v0.19.0 returns from CreateProducer when
// the pooled connection it picked is closed while the producer command is pending
// (internal.ErrConnectionClosed, not exported): seen after a producer was retired while
// messages were in flight.
var errPooledConnectionClosed = errors.New("connection closed")

// newCreateRetryPublisher is a publisher on the real broker whose first failing creations of
// a producer return errPooledConnectionClosed before the real creation runs.
func newCreateRetryPublisher(t *testing.T, failures int) (*Publisher, *atomic.Int32) {
	t.Helper()
	p, err := NewPublisher(PublisherConfig{Config: Config{URL: testsupport.PulsarURL(t)}}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	calls := &atomic.Int32{}
	real := p.newProducer
	p.newProducer = func(opts apulsar.ProducerOptions) (apulsar.Producer, error) {
		if int(calls.Add(1)) <= failures {
			return nil, errPooledConnectionClosed
		}
		return real(opts)
	}
	return p, calls
}

// TestCreateProducerRetriesClosedConnection: a producer creation that fails because the
// pooled connection was closed is tried again on a fresh connection, within the call, and
// the message is acknowledged by the broker.
func TestCreateProducerRetriesClosedConnection(t *testing.T) {
	p, calls := newCreateRetryPublisher(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msg := message.NewMessage(watermill.NewUUID(), []byte("x"))
	errs := p.PublishEach(ctx, testsupport.UniqueName("create_retry"), []*message.Message{msg})
	if len(errs) != 1 || errs[0] != nil {
		t.Fatalf("outcomes %v, want one nil (creations tried: %d)", errs, calls.Load())
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d creations, want 2 (one failed, one retried)", n)
	}
}

// TestCreateProducerRetryIsBounded: when every creation fails with a closed connection, the
// call stops trying once its context is done (or after createAttempts) and fails its
// messages with a retriable error naming the cause.
func TestCreateProducerRetryIsBounded(t *testing.T) {
	p, calls := newCreateRetryPublisher(t, 1<<30)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msgs := []*message.Message{message.NewMessage(watermill.NewUUID(), nil), message.NewMessage(watermill.NewUUID(), nil)}
	errs := p.PublishEach(ctx, testsupport.UniqueName("create_retry"), msgs)
	for i, err := range errs {
		if err == nil || !errors.Is(err, errPooledConnectionClosed) || !Retriable(err) {
			t.Errorf("message %d: %v, want a retriable connection-closed error", i, err)
		}
	}
	if n := calls.Load(); n != createAttempts {
		t.Errorf("%d creations, want %d", n, createAttempts)
	}

	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	calls.Store(0)
	errs = p.PublishEach(done, testsupport.UniqueName("create_retry"), msgs[:1])
	if n := calls.Load(); n != 1 {
		t.Errorf("with a done context: %d creations, want 1", n)
	}
	if errs[0] == nil {
		t.Errorf("with a done context: nil outcome")
	}
}
