// Package reconnecttest checks a publisher and a subscriber across broker restarts against the
// outbox's contract, with no window that a slow restart can miss: no message the publisher
// reported delivered is lost, and nothing arrives that was not sent. A message whose publish
// was reported failed may arrive anyway (the relay publishes it again: at-least-once allows the
// duplicate), so the check counts those but does not fail on them.
//
// Watermill's universal TestReconnect checks more than that contract and on a clock: it fails
// when no message arrives for 60 s, and it compares what arrived with the messages its
// publishers reported sent at the moment the last one arrived, so a message reported failed
// that arrived anyway, while its publisher was still retrying it, fails it. The broker packages
// run it as a soak test (scripts/soak.sh) and this contract in the gate.
package reconnecttest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

// Config is one run: the clients under test, the topic and how to restart the broker.
type Config struct {
	Publisher  message.Publisher
	Subscriber message.Subscriber
	Topic      string
	// Restart restarts the broker and returns once it serves again.
	Restart func() error
	// Restarts is how many times the broker is restarted (default 2).
	Restarts int
	// PerPhase is how many messages must be reported delivered before the first restart, and
	// after each restart before the next step (default 300): each restart happens while the
	// publishers are sending, and each phase after one proves the publisher works again.
	PerPhase int
	// Publishers is how many goroutines publish at once (default 10).
	Publishers int
	// RetryDelay is the pause before a failed publish is tried again (default 100 ms).
	RetryDelay time.Duration
	// HangBound ends a wait that would otherwise never end (default 5 minutes): a restart, a
	// phase or the arrival of every delivered message taking longer is a hang, far above what
	// a run needs.
	HangBound time.Duration
}

// Result is what a run saw.
type Result struct {
	// Delivered is how many messages the publisher reported delivered.
	Delivered int
	// FailedAttempts is how many publishes were reported failed (each retried until delivered).
	FailedAttempts int
	// FailedButArrived is how many messages arrived from an attempt reported failed before the
	// attempt reported delivered (at-least-once: the relay's retry makes them duplicates).
	FailedButArrived int
	// Received and Duplicates count the messages the subscriber got.
	Received, Duplicates int
}

func (c *Config) setDefaults() {
	if c.Restarts == 0 {
		c.Restarts = 2
	}
	if c.PerPhase == 0 {
		c.PerPhase = 300
	}
	if c.Publishers == 0 {
		c.Publishers = 10
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = 100 * time.Millisecond
	}
	if c.HangBound == 0 {
		c.HangBound = 5 * time.Minute
	}
}

// tally is the shared state of a run: what was reported, what arrived.
type tally struct {
	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every change
	sent      map[string]bool
	delivered map[string]bool
	received  map[string]int
	failedArr int // received before reported delivered, with a failed attempt reported
	failed    int
	attempted map[string]bool // a failed attempt was reported
}

func newTally() *tally {
	return &tally{changed: make(chan struct{}), sent: map[string]bool{}, delivered: map[string]bool{},
		received: map[string]int{}, attempted: map[string]bool{}}
}

// update runs f under the lock and wakes the waiters.
func (s *tally) update(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
	close(s.changed)
	s.changed = make(chan struct{})
}

// waitFor waits until cond holds (under the lock), or bound passes, or ctx ends.
func (s *tally) waitFor(ctx context.Context, bound time.Duration, cond func() bool) bool {
	timeout := time.NewTimer(bound)
	defer timeout.Stop()
	for {
		s.mu.Lock()
		ok, changed := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-timeout.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// Run publishes and reads across cfg.Restarts broker restarts and fails t when a message the
// publisher reported delivered never arrives, or when a message arrives that was never sent.
func Run(t testing.TB, cfg Config) Result {
	t.Helper()
	cfg.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newTally()
	if init, ok := cfg.Subscriber.(message.SubscribeInitializer); ok {
		if err := init.SubscribeInitialize(cfg.Topic); err != nil {
			t.Fatalf("initialize %s: %v", cfg.Topic, err)
		}
	}
	messages, err := cfg.Subscriber.Subscribe(ctx, cfg.Topic)
	if err != nil {
		t.Fatalf("subscribe to %s: %v", cfg.Topic, err)
	}
	go func() {
		for msg := range messages {
			s.update(func() {
				s.received[msg.UUID]++
				if s.received[msg.UUID] == 1 && !s.delivered[msg.UUID] && s.attempted[msg.UUID] {
					s.failedArr++
				}
			})
			msg.Ack()
		}
	}()

	stop := make(chan struct{})
	var publishers sync.WaitGroup
	for range cfg.Publishers {
		publishers.Add(1)
		go func() {
			defer publishers.Done()
			publishUntilStopped(ctx, cfg, s, stop)
		}()
	}
	delivered := func() int { return len(s.delivered) }
	phase := func(name string, atLeast int) {
		t.Helper()
		if !s.waitFor(ctx, cfg.HangBound, func() bool { return delivered() >= atLeast }) {
			s.mu.Lock()
			n := delivered()
			s.mu.Unlock()
			t.Fatalf("%s: %d messages reported delivered after %v, want %d: the publisher does not deliver (a hang)",
				name, n, cfg.HangBound, atLeast)
		}
	}
	phase("before the first restart", cfg.PerPhase)
	for i := range cfg.Restarts {
		started := time.Now()
		if err := restart(cfg); err != nil {
			t.Fatalf("restart %d: %v", i+1, err)
		}
		s.mu.Lock()
		target := delivered() + cfg.PerPhase
		s.mu.Unlock()
		t.Logf("restart %d took %v; %d messages reported delivered so far", i+1, time.Since(started).Round(time.Second), target-cfg.PerPhase)
		phase(fmt.Sprintf("after restart %d", i+1), target)
	}
	// The publishers finish the message each has in hand (the caller closes the publisher only
	// after that), then stop.
	close(stop)
	stopped := make(chan struct{})
	go func() { publishers.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(cfg.HangBound):
		t.Fatalf("the publishers did not finish their last messages within %v (a hang)", cfg.HangBound)
	}

	// Every message reported delivered must arrive; the bound only stops a hang.
	missing := func() []string {
		var out []string
		for id := range s.delivered {
			if s.received[id] == 0 {
				out = append(out, id)
			}
		}
		return out
	}
	if !s.waitFor(ctx, cfg.HangBound, func() bool { return len(missing()) == 0 }) {
		s.mu.Lock()
		m := missing()
		s.mu.Unlock()
		t.Errorf("%d of %d messages the publisher reported delivered never arrived (waited %v after the last publish), e.g. %v",
			len(m), len(s.delivered), cfg.HangBound, m[:min(len(m), 5)])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res := Result{Delivered: len(s.delivered), FailedAttempts: s.failed, FailedButArrived: s.failedArr}
	for id, n := range s.received {
		if !s.sent[id] {
			t.Errorf("message %s arrived but was never sent", id)
		}
		res.Received += n
		res.Duplicates += n - 1
	}
	t.Logf("%d messages reported delivered, %d publishes reported failed (retried), %d messages arrived from an attempt reported failed; "+
		"%d received, %d of them duplicates", res.Delivered, res.FailedAttempts, res.FailedButArrived, res.Received, res.Duplicates)
	return res
}

// restart runs cfg.Restart, bounded by cfg.HangBound.
func restart(cfg Config) error {
	done := make(chan error, 1)
	go func() { done <- cfg.Restart() }()
	select {
	case err := <-done:
		return err
	case <-time.After(cfg.HangBound):
		return fmt.Errorf("the broker did not serve again within %v", cfg.HangBound)
	}
}

// publishUntilStopped publishes new messages until stop is closed, each one again after a
// failure until the publisher reports it delivered, as the relay does with an event.
func publishUntilStopped(ctx context.Context, cfg Config, s *tally, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		msg := message.NewMessage(watermill.NewUUID(), []byte("x"))
		s.update(func() { s.sent[msg.UUID] = true })
		for {
			err := cfg.Publisher.Publish(cfg.Topic, msg.Copy())
			if err == nil {
				s.update(func() { s.delivered[msg.UUID] = true })
				break
			}
			s.update(func() { s.failed++; s.attempted[msg.UUID] = true })
			select {
			case <-time.After(cfg.RetryDelay):
			case <-ctx.Done():
				return
			}
		}
	}
}
