package outcometest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// outcome is a call of a concurrent case and what it returned.
type outcome struct {
	b        *batch
	errs     []error
	returned bool
}

// TestConcurrentCalls publishes from 4 goroutines at once, each its own 4 keys, 60 messages
// per call: every message is acknowledged and on the broker once, each key in order.
func TestConcurrentCalls(t *testing.T, tc TestContext) {
	pub, topic := newPublisher(t, tc), tc.Broker.NewTopic(t)
	calls := make([]outcome, 4)
	var wg sync.WaitGroup
	for g := range calls {
		calls[g].b = interleaved(fmt.Sprintf("goroutine%d", g), 4, 15)
		wg.Go(func() {
			calls[g].errs, calls[g].returned = call(context.Background(), pub, topic, calls[g].b, tc.Features.callTimeout())
		})
	}
	wg.Wait()
	got := tc.Broker.ReadTopic(t, topic)
	for g, c := range calls {
		if !c.returned {
			t.Fatalf("contract violation (ctx bounds the call): the concurrent call of goroutine %d has not returned after %s",
				g, tc.Features.callTimeout())
		}
		checkCount(t, c.b, c.errs)
		checkAllAcked(t, c.b, c.errs)
		at := locate(t, got, c.b)
		checkBroker(t, c.b, c.errs, at, true)
		checkOnce(t, c.b, at)
	}
}

// TestCloseWhileInFlight closes the publisher while 4 goroutines publish calls of 200 messages
// one after the other: Close and every call return within the call timeout; every call's
// outcomes are gapless, its failures retriable, and what it reported acknowledged is on the
// broker, each key in order; a call after Close fails every message, retriably.
func TestCloseWhileInFlight(t *testing.T, tc TestContext) {
	pub, topic := newPublisher(t, tc), tc.Broker.NewTopic(t)
	retriable := classifier(t, tc, pub)
	const workers, callsEach = 4, 10
	results := make([][]outcome, workers)
	var closed atomic.Bool
	firstReturned := make(chan struct{}, workers*callsEach)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for n := range callsEach {
				b := interleaved(fmt.Sprintf("w%d-%d", g, n), 5, 40)
				errs, ok := call(context.Background(), pub, topic, b, tc.Features.callTimeout())
				results[g] = append(results[g], outcome{b, errs, ok})
				firstReturned <- struct{}{}
				if !ok || closed.Load() {
					return
				}
			}
		})
	}
	select {
	case <-firstReturned:
	case <-time.After(tc.Features.callTimeout()):
		t.Fatalf("contract violation (ctx bounds the call): no call returned within %s", tc.Features.callTimeout())
	}
	closed.Store(true)
	closeWithin(t, pub, tc.Features.callTimeout())
	waitWithin(t, &wg, tc.Features.callTimeout())
	checkCloseOutcomes(t, tc, topic, results, retriable)

	after := interleaved("after-close", 2, 3)
	errs := publish(context.Background(), t, tc, pub, topic, after)
	for i, err := range errs {
		if err == nil {
			t.Errorf("message %d of a call after Close was acknowledged", i)
		}
	}
	checkRetriable(t, after, errs, retriable)
}

// checkCloseOutcomes checks every call of TestCloseWhileInFlight against the broker.
func checkCloseOutcomes(t *testing.T, tc TestContext, topic string, results [][]outcome, retriable func(error) bool) {
	t.Helper()
	got := tc.Broker.ReadTopic(t, topic)
	cut := 0
	for g, calls := range results {
		for n, c := range calls {
			if !c.returned {
				t.Errorf("contract violation (Close while in flight): call %d of goroutine %d has not returned %s after Close",
					n, g, tc.Features.callTimeout())
				continue
			}
			checkCount(t, c.b, c.errs)
			checkGapless(t, c.b, c.errs)
			checkRetriable(t, c.b, c.errs, retriable)
			checkBroker(t, c.b, c.errs, locate(t, got, c.b), false)
			for _, err := range c.errs {
				if err != nil {
					cut++
					break
				}
			}
		}
	}
	t.Logf("%d calls had failures after Close", cut)
}

// closeWithin closes pub and fails the test when Close does not return within timeout.
func closeWithin(t *testing.T, pub Publisher, timeout time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- pub.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Logf("Close while calls were in flight: %v", err)
		}
	case <-time.After(timeout):
		t.Fatalf("contract violation (Close while in flight): Close has not returned after %s", timeout)
	}
}

// waitWithin waits for wg, failing the test when it takes longer than timeout.
func waitWithin(t *testing.T, wg *sync.WaitGroup, timeout time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		t.Fatalf("contract violation (Close while in flight): publishing goroutines still running %s after Close", timeout)
	}
}
