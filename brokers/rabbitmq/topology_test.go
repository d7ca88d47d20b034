package rabbitmq

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestTopologyDeclaresATopicOnceAtATime: 8 first calls of a publisher to a new topic ensure its
// topology at once. One declares it, on the real broker; the others wait for it and declare
// nothing. RabbitMQ 3.10 answered two channels declaring the same new durable queue at once with
// a 404 for one of them ("home node … is down or inaccessible"), which failed that call's
// messages (seen in CI, in the outcome conformance test's concurrent calls).
func TestTopologyDeclaresATopicOnceAtATime(t *testing.T) {
	cfg := Config{URL: testsupport.RabbitMQURL(t), Partitions: 8}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	conn := &connector{config: cfg}
	defer conn.close()
	top := newTopology(cfg, conn)
	declare := top.declare
	var inside, most, calls atomic.Int32
	top.declare = func(ch *amqp.Channel, topic string) error {
		n := inside.Add(1)
		defer inside.Add(-1)
		calls.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(50 * time.Millisecond) // a declaration in flight while the other calls arrive
		return declare(ch, topic)
	}
	topic := "topology." + testsupport.UniqueName("t")
	defer func() {
		if ch, err := conn.channel(); err == nil {
			for _, q := range cfg.Queues(topic) {
				_, _ = ch.QueueDelete(q, false, false, false)
			}
			_ = ch.ExchangeDelete(topic, false, false)
			_ = ch.Close()
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for g := range errs {
		wg.Go(func() { errs[g] = top.ensure(context.Background(), topic) })
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", g, err)
		}
	}
	if most.Load() != 1 || calls.Load() != 1 {
		t.Fatalf("%d declarations of the topic, up to %d at once; want one", calls.Load(), most.Load())
	}
}

// TestTopologyDeclaresAgainWhileAQueueStarts: another connection (a consumer, another relay)
// declaring the same new durable queue at the same moment makes RabbitMQ answer a 404 ("home
// node … is down or inaccessible"); the declaration is tried again on a new channel and
// succeeds. Any other refusal (a 404 for a missing exchange) fails at once.
func TestTopologyDeclaresAgainWhileAQueueStarts(t *testing.T) {
	cfg := Config{URL: testsupport.RabbitMQURL(t)}
	cfg.SetDefaults()
	conn := &connector{config: cfg}
	defer conn.close()
	for _, c := range []struct {
		reason    string
		wantCalls int32
		wantErr   bool
	}{
		{"NOT_FOUND - home node 'rabbit@h' of durable queue 'q' in vhost '/' is down or inaccessible", 2, false},
		{"NOT_FOUND - no exchange 'x' in vhost '/'", 1, true},
	} {
		top := newTopology(cfg, conn)
		declare := top.declare
		var calls atomic.Int32
		top.declare = func(ch *amqp.Channel, topic string) error {
			if calls.Add(1) == 1 {
				return fmt.Errorf("rabbitmq: declare queue q: %w", &amqp.Error{Code: amqp.NotFound, Reason: c.reason})
			}
			return declare(ch, topic)
		}
		topic := "topology." + testsupport.UniqueName("t")
		err := top.ensure(context.Background(), topic)
		if (err != nil) != c.wantErr || calls.Load() != c.wantCalls {
			t.Errorf("first declaration refused with %q: ensure returned %v after %d declarations; want error %v after %d",
				c.reason, err, calls.Load(), c.wantErr, c.wantCalls)
		}
		if ch, err := conn.channel(); err == nil {
			for _, q := range cfg.Queues(topic) {
				_, _ = ch.QueueDelete(q, false, false, false)
			}
			_ = ch.ExchangeDelete(topic, false, false)
			_ = ch.Close()
		}
	}
}
