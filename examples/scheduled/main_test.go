package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestScheduled runs the whole demo (no external service) with a 2 s deadline and checks its
// story: both OrderPlaced events arrive, o-1's PaymentDeadline arrives once, not before its time
// (run fails otherwise), and cancels the unpaid order; o-2's, cancelled with the payment, is not
// in the scheduled list and never arrives; the outbox ends empty.
func TestScheduled(t *testing.T) {
	var out bytes.Buffer
	const deadline = 2 * time.Second
	err := run(context.Background(), &out, t.TempDir(), deadline)
	got := out.String()
	t.Log("\n" + got)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	ids := map[string][2]string{} // order -> OrderPlaced, PaymentDeadline
	for _, m := range regexp.MustCompile(`order (o-\d) placed \(unpaid\) with OrderPlaced ([0-9a-f-]{36}) and PaymentDeadline ([0-9a-f-]{36}) due at \+2s`).FindAllStringSubmatch(got, -1) {
		ids[m[1]] = [2]string{m[2], m[3]}
	}
	if len(ids) != 2 {
		t.Fatalf("%d orders placed, want o-1 and o-2", len(ids))
	}
	for _, o := range []string{"o-1", "o-2"} {
		if n := strings.Count(got, "OrderPlaced "+ids[o][0]+" key "+o+"\n"); n != 1 {
			t.Errorf("OrderPlaced of %s reported %d times, want 1", o, n)
		}
	}
	if !strings.Contains(got, "order o-2 paid; its PaymentDeadline cancelled in the same transaction (cancelled 1, released 0, not found 0)") {
		t.Error("missing o-2's payment with its cancel")
	}
	if !strings.Contains(got, "scheduled now (outboxkit scheduled list): 1\n  "+ids["o-1"][1]+" PaymentDeadline key o-1 due at +2s\n") {
		t.Error("the scheduled list is not o-1's deadline alone")
	}
	arrived := regexp.MustCompile(`consumer at \+([0-9.]+m?s): PaymentDeadline ` + ids["o-1"][1] + ` key o-1 \(due at \+2s\): unpaid: order cancelled`).FindStringSubmatch(got)
	if arrived == nil {
		t.Fatal("o-1's PaymentDeadline did not cancel the unpaid order")
	}
	if at, err := time.ParseDuration(arrived[1]); err != nil || at < deadline {
		t.Errorf("o-1's PaymentDeadline printed at +%s, want at or after +%s", arrived[1], deadline)
	}
	if strings.Contains(got, ids["o-2"][1]+" key") || strings.Count(got, "PaymentDeadline "+ids["o-1"][1]+" key") != 1 {
		t.Error("o-2's cancelled deadline arrived, or o-1's not exactly once")
	}
	for _, want := range []string{"was never published", "outbox is empty; orders: o-1=cancelled o-2=paid", "What happened:"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestDeadlineOutOfRange: a deadline the demo cannot wait for is refused, naming it.
func TestDeadlineOutOfRange(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second, time.Hour} {
		if err := run(context.Background(), &bytes.Buffer{}, t.TempDir(), d); err == nil || !strings.Contains(err.Error(), d.String()) {
			t.Errorf("deadline %s: %v, want an error naming it", d, err)
		}
	}
}
