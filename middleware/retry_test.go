package middleware_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	wmmiddleware "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/outboxkit/outboxkit/middleware"
)

// recordingPublisher passes messages on to the wrapped publisher and remembers them per topic,
// so a test can prove that a message was NOT poisoned without waiting for it not to arrive.
type recordingPublisher struct {
	message.Publisher
	mu        sync.Mutex
	published map[string][]*message.Message
}

func newRecordingPublisher(pub message.Publisher) *recordingPublisher {
	return &recordingPublisher{Publisher: pub, published: map[string][]*message.Message{}}
}

func (p *recordingPublisher) Publish(topic string, msgs ...*message.Message) error {
	p.mu.Lock()
	for _, m := range msgs {
		p.published[topic] = append(p.published[topic], m.Copy())
	}
	p.mu.Unlock()
	return p.Publisher.Publish(topic, msgs...)
}

func (p *recordingPublisher) on(topic string) []*message.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*message.Message(nil), p.published[topic]...)
}

// fastRetry is a RetryPoisonConfig with millisecond backoff, so tests spend no time waiting.
func fastRetry(pub message.Publisher, poisonTopic string, maxRetries int) middleware.RetryPoisonConfig {
	return middleware.RetryPoisonConfig{
		Publisher: pub, PoisonTopic: poisonTopic, MaxRetries: maxRetries,
		InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond,
	}
}

func newGoChannel(t *testing.T) *gochannel.GoChannel {
	t.Helper()
	pubsub := gochannel.NewGoChannel(gochannel.Config{Persistent: true}, watermill.NopLogger{})
	t.Cleanup(func() { _ = pubsub.Close() })
	return pubsub
}

func runRouter(t *testing.T, router *message.Router) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- router.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		_ = router.Close()
		if err := <-errc; err != nil {
			t.Errorf("router: %v", err)
		}
	})
	select {
	case <-router.Running():
	case err := <-errc:
		errc <- err
		t.Fatalf("router stopped before running: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("router did not start within 60s")
	}
}

// outcome is the final result of one delivery as seen by the outermost middleware.
type outcome struct {
	uuid, payload string
	err           error
}

// observe is a middleware recording every delivery's final result. Added first, it is the
// outermost middleware, so it sees what the Router acks or nacks.
func observe(out chan<- outcome) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			produced, err := h(msg)
			out <- outcome{uuid: msg.UUID, payload: string(msg.Payload), err: err}
			return produced, err
		}
	}
}

func waitOutcome(t *testing.T, out <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-out:
		return o
	case <-time.After(60 * time.Second):
		t.Fatal("no delivery finished within 60s")
		return outcome{}
	}
}

// TestRetryThenPoisonOrderTrap shows the trap and that the helper avoids it. With Retry added
// before PoisonQueue, PoisonQueue is the inner middleware: it swallows the first error, so Retry
// sees a success and the handler runs once. RetryThenPoison nests them the other way round.
func TestRetryThenPoisonOrderTrap(t *testing.T) {
	const maxRetries = 3
	pubsub := newGoChannel(t)
	pub := newRecordingPublisher(pubsub)
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan outcome, 10)
	router.AddMiddleware(observe(out))

	retry := wmmiddleware.Retry{MaxRetries: maxRetries, InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond, Multiplier: 2}
	poison, err := wmmiddleware.PoisonQueue(pub, "poison")
	if err != nil {
		t.Fatal(err)
	}
	helper, err := middleware.RetryThenPoison(fastRetry(pub, "poison", maxRetries))
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]*atomic.Int32{}
	for _, name := range []string{"wrong_order", "helper"} {
		calls[name] = &atomic.Int32{}
		h := router.AddConsumerHandler(name, name, pubsub, func(msg *message.Message) error {
			calls[name].Add(1)
			return errors.New("always fails")
		})
		if name == "wrong_order" {
			h.AddMiddleware(retry.Middleware, poison) // the trap: Retry outermost
		} else {
			h.AddMiddleware(helper)
		}
	}
	runRouter(t, router)

	for _, name := range []string{"wrong_order", "helper"} {
		if err := pubsub.Publish(name, message.NewMessage(watermill.NewUUID(), []byte(name))); err != nil {
			t.Fatal(err)
		}
		if o := waitOutcome(t, out); o.err != nil || o.payload != name {
			t.Fatalf("delivery of %q ended with %+v, want the %q message acked after poisoning", name, o, name)
		}
	}
	if got := calls["wrong_order"].Load(); got != 1 {
		t.Fatalf("Retry added before PoisonQueue: handler called %d times; the trap is that Retry never runs (want 1)", got)
	}
	if got := calls["helper"].Load(); got != maxRetries+1 {
		t.Fatalf("RetryThenPoison: handler called %d times, want MaxRetries+1 = %d", got, maxRetries+1)
	}
	if got := len(pub.on("poison")); got != 2 {
		t.Fatalf("%d messages poisoned, want 2 (one per handler)", got)
	}
}

func TestRetryThenPoisonRecoversPanics(t *testing.T) {
	pub := newRecordingPublisher(newGoChannel(t))
	mw, err := middleware.RetryThenPoison(fastRetry(pub, "poison", 2))
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	h := mw(func(msg *message.Message) ([]*message.Message, error) {
		calls++
		panic("nil map somewhere")
	})
	if _, err := h(message.NewMessage("m1", []byte("p"))); err != nil {
		t.Fatalf("handler error %v, want nil (poisoned and acked)", err)
	}
	if calls != 3 {
		t.Fatalf("panicking handler called %d times, want 3 (MaxRetries 2 + 1)", calls)
	}
	poisoned := pub.on("poison")
	if len(poisoned) != 1 || !strings.Contains(poisoned[0].Metadata.Get(wmmiddleware.ReasonForPoisonedKey), "panic occurred") {
		t.Fatalf("poisoned %v, want one message whose reason reports the panic", poisoned)
	}
}

func TestRetryThenPoisonPermanentAndFilters(t *testing.T) {
	errTransient := errors.New("database is down")
	pub := newRecordingPublisher(newGoChannel(t))
	cfg := fastRetry(pub, "poison", 3)
	cfg.ShouldPoison = func(err error) bool { return !errors.Is(err, errTransient) }
	mw, err := middleware.RetryThenPoison(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	permanent := mw(func(msg *message.Message) ([]*message.Message, error) {
		calls++
		return nil, middleware.Permanent(errors.New("malformed payload"))
	})
	if _, err := permanent(message.NewMessage("m1", []byte("{"))); err != nil {
		t.Fatalf("permanent error: handler returned %v, want nil (poisoned)", err)
	}
	if calls != 1 {
		t.Fatalf("handler failing with a Permanent error called %d times, want 1 (no retries)", calls)
	}
	calls = 0
	transient := mw(func(msg *message.Message) ([]*message.Message, error) {
		calls++
		return nil, errTransient
	})
	if _, err := transient(message.NewMessage("m2", nil)); !errors.Is(err, errTransient) {
		t.Fatalf("error rejected by ShouldPoison: handler returned %v, want it back so the Router nacks", err)
	}
	if calls != 4 {
		t.Fatalf("handler called %d times, want 4", calls)
	}
	if got := pub.on("poison"); len(got) != 1 || got[0].UUID != "m1" {
		t.Fatalf("poisoned %v, want only m1", got)
	}
	if middleware.Permanent(nil) != nil || middleware.IsPermanent(errTransient) {
		t.Fatal("Permanent(nil) must be nil and a plain error must not be permanent")
	}
}

func TestRetryPoisonConfigValidate(t *testing.T) {
	pub := newGoChannel(t)
	for _, tc := range []struct {
		name    string
		mutate  func(c *middleware.RetryPoisonConfig)
		wantErr string
	}{
		{"defaults", func(*middleware.RetryPoisonConfig) {}, ""},
		{"no publisher", func(c *middleware.RetryPoisonConfig) { c.Publisher = nil }, "RetryPoisonConfig.Publisher is nil"},
		{"no topic", func(c *middleware.RetryPoisonConfig) { c.PoisonTopic = "" }, "RetryPoisonConfig.PoisonTopic is empty"},
		{"negative retries", func(c *middleware.RetryPoisonConfig) { c.MaxRetries = -1 }, "RetryPoisonConfig.MaxRetries is -1, want >= 0"},
		{"negative interval", func(c *middleware.RetryPoisonConfig) { c.InitialInterval = -time.Second }, "RetryPoisonConfig.InitialInterval is -1s, want >= 0"},
		{"max below initial", func(c *middleware.RetryPoisonConfig) {
			c.InitialInterval, c.MaxInterval = time.Second, time.Millisecond
		},
			"RetryPoisonConfig.MaxInterval 1ms is less than InitialInterval 1s"},
		{"multiplier", func(c *middleware.RetryPoisonConfig) { c.Multiplier = 0.5 }, "RetryPoisonConfig.Multiplier is 0.5, want >= 1"},
		{"jitter", func(c *middleware.RetryPoisonConfig) { c.RandomizationFactor = 1.5 }, "RetryPoisonConfig.RandomizationFactor is 1.5, want between 0 and 1"},
		{"elapsed", func(c *middleware.RetryPoisonConfig) { c.MaxElapsedTime = -time.Minute }, "RetryPoisonConfig.MaxElapsedTime is -1m0s, want >= 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := middleware.RetryPoisonConfig{Publisher: pub, PoisonTopic: "poison"}
			tc.mutate(&c)
			mw, err := middleware.RetryThenPoison(c)
			if tc.wantErr == "" {
				if err != nil || mw == nil {
					t.Fatalf("RetryThenPoison: %v", err)
				}
				return
			}
			if err == nil || err.Error() != "invalid retry/poison config: "+tc.wantErr {
				t.Fatalf("error %v, want %q", err, "invalid retry/poison config: "+tc.wantErr)
			}
		})
	}
}
