package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestCQRS runs the whole demo (no external service) and checks its story: the three committed
// events reach their typed handlers with their fields, o-1's OrderPlaced before its OrderPaid,
// and nothing of the rolled-back order o-2.
func TestCQRS(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, t.TempDir()); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	got := out.String()
	t.Log("\n" + got)

	placed1 := "read model: order o-1 placed by alice, 42.00\n"
	paid1 := "read model: order o-1 paid (pay-o-1)\n"
	placed3 := "read model: order o-3 placed by carol, 7.50\n"
	for _, want := range []string{
		"order o-1: saved with OrderPlaced and OrderPaid in one transaction",
		"order o-2: payment declined, transaction rolled back: no event",
		"order o-3: saved with OrderPlaced\n",
		"the outbox holds 3 pending events",
		placed1, paid1, placed3,
		"outbox is empty: the read model received 3 events, none of order o-2",
		"What happened:",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("output lacks %q", want)
		}
	}
	if strings.Index(got, placed1) > strings.Index(got, paid1) {
		t.Fatal("o-1's OrderPaid arrived before its OrderPlaced")
	}
	if strings.Contains(got, "read model: order o-2") {
		t.Fatal("an event of the rolled-back order o-2 reached the read model")
	}
}
