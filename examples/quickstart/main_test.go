package main

import (
	"bytes"
	"context"
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
