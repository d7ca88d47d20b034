package reconnecttest

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
)

// recorder is a testing.TB that records the failures of Run instead of failing the test.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *recorder) Helper() {}

func (r *recorder) Logf(format string, args ...any) { r.TB.Logf(format, args...) }

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// run runs Run on a recorder and returns what it reported.
func run(t *testing.T, cfg Config) (Result, []string) {
	r := &recorder{TB: t}
	var res Result
	done := make(chan struct{})
	go func() {
		defer close(done)
		res = Run(r, cfg)
	}()
	<-done
	return res, r.failures
}

// publisher wraps Watermill's in-memory Pub/Sub (the checker's own test: the brokers' tests run
// Run on the real brokers) with a fault of its own per publish.
type publisher struct {
	message.Publisher
	n     atomic.Int64
	fault func(n int64, pub message.Publisher, topic string, msg *message.Message) error
}

func (p *publisher) Publish(topic string, msgs ...*message.Message) error {
	for _, msg := range msgs {
		if err := p.fault(p.n.Add(1), p.Publisher, topic, msg); err != nil {
			return err
		}
	}
	return nil
}

func newConfig(t *testing.T, fault func(n int64, pub message.Publisher, topic string, msg *message.Message) error) Config {
	ps := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: 100000}, watermill.NopLogger{})
	t.Cleanup(func() { _ = ps.Close() })
	return Config{Publisher: &publisher{Publisher: ps, fault: fault}, Subscriber: ps, Topic: "t", PerPhase: 50, Publishers: 4,
		RetryDelay: time.Millisecond, Restart: func() error { return nil }}
}

// TestRunAllowsMessagesReportedFailed: a publish reported failed whose message arrived anyway
// (every 7th) is retried, not a failure: at-least-once allows the duplicate.
func TestRunAllowsMessagesReportedFailed(t *testing.T) {
	cfg := newConfig(t, func(n int64, pub message.Publisher, topic string, msg *message.Message) error {
		if err := pub.Publish(topic, msg); err != nil {
			return err
		}
		if n%7 == 0 {
			return errors.New("reported failed, delivered anyway")
		}
		return nil
	})
	res, failures := run(t, cfg)
	if len(failures) > 0 {
		t.Fatalf("Run failed: %v", failures)
	}
	if res.FailedAttempts == 0 || res.Delivered < 3*cfg.PerPhase {
		t.Fatalf("result %+v: want failed attempts and at least %d delivered", res, 3*cfg.PerPhase)
	}
}

// TestRunFailsOnALostMessage: a message reported delivered that never arrives (every 50th is
// dropped) fails the run.
func TestRunFailsOnALostMessage(t *testing.T) {
	cfg := newConfig(t, func(n int64, pub message.Publisher, topic string, msg *message.Message) error {
		if n%50 == 0 {
			return nil // reported delivered, never sent
		}
		return pub.Publish(topic, msg)
	})
	cfg.HangBound = 2 * time.Second // the dropped messages never arrive: the wait ends at the bound
	_, failures := run(t, cfg)
	if len(failures) != 1 || !strings.Contains(failures[0], "messages the publisher reported delivered never arrived") {
		t.Fatalf("failures %q, want one naming the messages that never arrived", failures)
	}
}

// TestRunFailsOnAMessageNeverSent: a message that arrives but was never sent fails the run.
func TestRunFailsOnAMessageNeverSent(t *testing.T) {
	cfg := newConfig(t, func(n int64, pub message.Publisher, topic string, msg *message.Message) error {
		if n == 10 {
			if err := pub.Publish(topic, message.NewMessage(watermill.NewUUID(), []byte("phantom"))); err != nil {
				return err
			}
		}
		return pub.Publish(topic, msg)
	})
	_, failures := run(t, cfg)
	if len(failures) != 1 || !strings.Contains(failures[0], "arrived but was never sent") {
		t.Fatalf("failures %q, want one naming the message never sent", failures)
	}
}
