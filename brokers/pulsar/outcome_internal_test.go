package pulsar

import (
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

// TestFinishMakesOutcomesGapless: an acknowledgement that arrives for a later message of a
// key after an earlier one failed (possible after pulsar-client-go fails pending messages
// on ProducerBlockedQuotaExceeded and keeps the producer) is reported as a failure.
func TestFinishMakesOutcomesGapless(t *testing.T) {
	keys := []string{"K", "A", "K", "K", "A"}
	msgs := make([]*message.Message, len(keys))
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewUUID(), nil)
	}
	failure := errors.New("broker said no")
	call := &publishCall{
		topic: "persistent://public/default/t", msgs: msgs, keys: keys,
		errs: []error{nil, nil, failure, nil, nil},
		done: make([]bool, len(msgs)), failed: map[string]int{}, settled: make(chan struct{}),
	}
	errs := call.finish(watermill.NopLogger{})
	if len(errs) != len(msgs) {
		t.Fatalf("%d outcomes for %d messages", len(errs), len(msgs))
	}
	for i, want := range []error{nil, nil, failure, ErrAcknowledgedAfterFailure, nil} {
		if want == nil && errs[i] != nil || want != nil && !errors.Is(errs[i], want) {
			t.Errorf("message %d (key %s): %v, want %v", i, keys[i], errs[i], want)
		}
	}
}
