package forwarder_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestCDCFailedAcknowledgementIsReplayedBeforeTheKeysNextEvent: a part's acknowledgement fails
// (a database error, not a lost lease) after its event was published, while the key's next
// event is written. The stream replays the failed part before the key's next event is published,
// so the key's last copy on the broker is its last event (duplicates, in order). A worker that
// acknowledged a part behind its next one would publish the next event first and then replay the
// failed part after it: a compacted topic would keep the earlier event.
func TestCDCFailedAcknowledgementIsReplayedBeforeTheKeysNextEvent(t *testing.T) {
	h := newCDCHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	e0, e1 := h.event("k", 0), h.event("k", 1)
	events := h.writer.Table().Events()
	seq := events + "_ackfail_once"
	for _, q := range []string{
		"CREATE SEQUENCE " + seq,
		"CREATE FUNCTION " + events + "_ackfail() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN " +
			"IF OLD.event_id = '" + e0.ID.String() + "' AND nextval('" + seq + "') = 1 THEN " +
			"PERFORM pg_sleep(0.8); RAISE EXCEPTION 'injected acknowledgement failure'; END IF; RETURN OLD; END $$",
		"CREATE TRIGGER ackfail BEFORE DELETE ON " + events + " FOR EACH ROW EXECUTE FUNCTION " + events + "_ackfail()",
	} {
		if _, err := h.db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = h.db.Exec("DROP TRIGGER IF EXISTS ackfail ON " + events)
		_, _ = h.db.Exec("DROP FUNCTION IF EXISTS " + events + "_ackfail()")
		_, _ = h.db.Exec("DROP SEQUENCE IF EXISTS " + seq)
	})
	cfg := h.config(h.publisher())
	cfg.Workers = 1
	h.start(cfg)
	h.waitForStream()
	h.write(e0)
	time.Sleep(250 * time.Millisecond) // e0 published; its acknowledgement (behind) sleeps, then fails
	h.write(e1)
	got := consumeUntil(t, h.brokers, h.topic, func(got []received) bool { return len(got) >= 3 }, 2*time.Minute)
	var order []string
	for _, r := range got {
		order = append(order, fmt.Sprintf("k/%d", r.n))
	}
	t.Logf("broker order of key k: %v", order)
	checkDelivery(t, got, []string{"k"}, 2)
	last := map[string]int{}
	for i, r := range got {
		last[r.eventID] = i
	}
	if last[e0.ID.String()] > last[e1.ID.String()] {
		t.Errorf("the replayed k/0 reached the broker after k/1: %v (a compacted topic keeps k/0)", order)
	}
}
