package outcometest

import (
	"testing"
)

// The checks of the contract. Each failure message starts with "contract violation" and names
// the rule, the message (index in the call, key, UUID) and the publisher's error.

// checkCount checks that there is one outcome per message; the other checks need it.
func checkCount(t *testing.T, b *batch, errs []error) {
	t.Helper()
	if len(errs) != len(b.msgs) {
		t.Fatalf("contract violation (exactly len(msgs) errors): PublishEach returned %d outcomes for %d messages",
			len(errs), len(b.msgs))
	}
}

// checkAllAcked checks that every message was acknowledged.
func checkAllAcked(t *testing.T, b *batch, errs []error) {
	t.Helper()
	for i, err := range errs {
		if err != nil {
			t.Errorf("message %d (key %s, %s) failed on a healthy broker: %v", i, b.keys[i], b.msgs[i].UUID, err)
		}
	}
}

// checkGapless checks that the failures are gapless per key: no message acknowledged after an
// earlier message of its key failed.
func checkGapless(t *testing.T, b *batch, errs []error) {
	t.Helper()
	firstFailed := map[string]int{}
	for i, err := range errs {
		first, failed := firstFailed[b.keys[i]]
		switch {
		case failed && err == nil:
			t.Errorf("contract violation (gapless per key): message %d (key %s, %s) was acknowledged after message %d "+
				"of its key failed (%v)", i, b.keys[i], b.msgs[i].UUID, first, errs[first])
		case !failed && err != nil:
			firstFailed[b.keys[i]] = i
		}
	}
}

// checkRetriable checks that every failure is retriable by the publisher's classifier, for a
// call where no message is at fault (a cancelled context, a closed publisher).
func checkRetriable(t *testing.T, b *batch, errs []error, retriable func(error) bool) {
	t.Helper()
	for i, err := range errs {
		if err != nil && !retriable(err) {
			t.Errorf("contract violation (a retriable failure is not a permanent one): message %d (key %s, %s) failed "+
				"through no fault of its own, but the classifier calls the error permanent, so the forwarder would "+
				"dead-letter it: %v", i, b.keys[i], b.msgs[i].UUID, err)
		}
	}
}

// onBroker is where the messages of one call are on the broker: the positions of each UUID in
// the order read back.
type onBroker map[string][]int

// locate indexes the messages of b found in got (a topic read back), checking their broker keys.
func locate(t *testing.T, got []Received, b *batch) onBroker {
	t.Helper()
	mine := make(map[string]int, len(b.msgs))
	for i, m := range b.msgs {
		mine[m.UUID] = i
	}
	at := onBroker{}
	for pos, r := range got {
		i, ok := mine[r.UUID]
		if !ok {
			continue
		}
		if r.Key != b.keys[i] {
			t.Errorf("message %d (%s) is on the broker with key %q, want its key metadata %q", i, r.UUID, r.Key, b.keys[i])
		}
		at[r.UUID] = append(at[r.UUID], pos)
	}
	return at
}

// checkBroker checks what the broker holds against the outcomes: every acknowledged message is
// there; per key, the messages are in the call's order; no message of a key is there after a
// failed message of its key that is not. With exact, no failed message is there at all (a
// healthy broker, a refusal).
func checkBroker(t *testing.T, b *batch, errs []error, at onBroker, exact bool) {
	t.Helper()
	last := map[string]int{}    // key -> first broker position of the key's latest message so far
	missing := map[string]int{} // key -> index of its first failed message absent from the broker
	for i, m := range b.msgs {
		key, pos := b.keys[i], at[m.UUID]
		switch {
		case errs[i] == nil && len(pos) == 0:
			t.Errorf("contract violation (nothing reported acknowledged that is not on the broker): message %d "+
				"(key %s, %s) was acknowledged and is not on the broker", i, key, m.UUID)
		case exact && errs[i] != nil && len(pos) > 0:
			t.Errorf("contract violation (a failed message is not delivered): message %d (key %s, %s) failed and is "+
				"on the broker: %v", i, key, m.UUID, errs[i])
		}
		if first, ok := missing[key]; ok && len(pos) > 0 {
			t.Errorf("contract violation (gapless per key): message %d (key %s, %s) is on the broker but the earlier "+
				"message %d of its key failed and is not: a gap (%v)", i, key, m.UUID, first, errs[first])
		}
		if errs[i] != nil && len(pos) == 0 {
			if _, ok := missing[key]; !ok {
				missing[key] = i
			}
		}
		if len(pos) == 0 {
			continue
		}
		// First copies: a message failed, present and sent again is a duplicate, not a reordering.
		if prev, ok := last[key]; ok && pos[0] < prev {
			t.Errorf("contract violation (per-key order): message %d (key %s, %s) is on the broker before an earlier "+
				"message of its key", i, key, m.UUID)
		}
		last[key] = pos[0]
	}
}

// checkOnce checks that every message of b is on the broker at most once, after a call on a
// healthy broker.
func checkOnce(t *testing.T, b *batch, at onBroker) {
	t.Helper()
	for i, m := range b.msgs {
		if n := len(at[m.UUID]); n > 1 {
			t.Errorf("message %d (key %s, %s) is on the broker %d times after one call on a healthy broker "+
				"(Features.DuplicatesOnFailure is false)", i, b.keys[i], m.UUID, n)
		}
	}
}
