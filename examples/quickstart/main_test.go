package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
)

// TestQuickstart runs the whole demo (no external service) and checks its story: both committed
// orders reach the consumer with their event id, type, key and payload, and the rolled-back
// order has no outbox row and no message.
func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, t.TempDir()); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	got := out.String()
	t.Log("\n" + got)

	for _, id := range []string{"o-1", "o-3"} {
		// The event id printed when the order was saved must be the one the consumer received.
		saved := regexp.MustCompile(`order ` + id + ` saved with its OrderPlaced event in one transaction \(event ([0-9a-f-]{36})\)`).FindStringSubmatch(got)
		if saved == nil {
			t.Fatalf("order %s: no save line", id)
		}
		consumed := regexp.MustCompile(`consumer received: event ` + saved[1] + ` type OrderPlaced key ` + id + ` payload \{"order_id":"` + id + `"`)
		if n := len(consumed.FindAllString(got, -1)); n != 1 {
			t.Fatalf("order %s: event %s received %d times, want 1", id, saved[1], n)
		}
	}
	if !strings.Contains(got, "order o-2 rolled back: no event (outbox rows for o-2: 0)") {
		t.Fatal("missing the rolled-back order line")
	}
	if strings.Contains(got, `key o-2`) || strings.Contains(got, `"order_id":"o-2"`) {
		t.Fatal("the rolled-back order o-2 reached the consumer")
	}
	if n := strings.Count(got, "consumer received:"); n != 2 {
		t.Fatalf("consumer printed %d events, want 2", n)
	}
	for _, want := range []string{"the outbox holds 2 pending events", "outbox is empty", "What happened:"} {
		if !strings.Contains(got, want) {
			t.Fatalf("output lacks %q", want)
		}
	}
}

// TestStoppedByReportsAnEarlyReturn: a router or forwarder that returns while the demo runs stops
// the wait with an error naming it, even when it returned nil (a Watermill Router does once all
// its handlers stopped); one that returns because the demo ended stops nothing.
func TestStoppedByReportsAnEarlyReturn(t *testing.T) {
	running, stop := context.WithCancel(context.Background())
	if err := stoppedBy(running, "router", nil); err == nil || !strings.Contains(err.Error(), "router stopped") {
		t.Errorf("router returned nil while running: got %v, want an error naming it", err)
	}
	failed := errors.New("broker gone")
	if err := stoppedBy(running, "forwarder", failed); !errors.Is(err, failed) || !strings.Contains(err.Error(), "forwarder stopped") {
		t.Errorf("forwarder failed: got %v, want its error, named", err)
	}
	stop()
	if err := stoppedBy(running, "router", nil); err != nil {
		t.Errorf("router returned nil after the demo ended: got %v, want nil", err)
	}
}
