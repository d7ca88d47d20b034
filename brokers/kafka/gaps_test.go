package kafka

import (
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kerr"
)

// closeGaps turns every outcome after a key's first failure into ErrEarlierMessageFailed and
// reports the acknowledged ones among them as reorderings; other keys are untouched.
func TestCloseGaps(t *testing.T) {
	keys := []string{"a", "b", "a", "a", "b", "a", "c"}
	msgs := make([]*message.Message, len(keys))
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewUUID(), nil)
	}
	cause := kerr.InvalidRecord
	errs := []error{nil, nil, cause, nil, kerr.NotEnoughReplicas, cause, nil}
	reordered := closeGaps(msgs, keys, errs)
	want := []error{nil, nil, cause, ErrEarlierMessageFailed, kerr.NotEnoughReplicas, ErrEarlierMessageFailed, nil}
	for i := range errs {
		if want[i] == nil && errs[i] != nil || want[i] != nil && !errors.Is(errs[i], want[i]) {
			t.Errorf("message %d (key %s): %v, want %v", i, keys[i], errs[i], want[i])
		}
	}
	if errors.Is(errs[3], cause) || !Retriable(errs[3]) || !Retriable(errs[5]) {
		t.Errorf("held-back messages must be retriable and not carry the first cause: %v", errs[3])
	}
	if len(reordered) != 1 || reordered[0].first != 2 || reordered[0].later != 3 || reordered[0].cause != cause {
		t.Errorf("reordered %+v, want message 3 after message 2", reordered)
	}
	// A nil message is skipped; an already held-back message keeps its error.
	msgs[1] = nil
	errs = []error{cause, ErrInvalidMessage, earlierFailed(msgs[2], msgs[0], "a", cause), nil, nil, nil, nil}
	held := errs[2]
	if r := closeGaps(msgs, keys, errs); len(r) != 2 || errs[2] != held || !errors.Is(errs[1], ErrInvalidMessage) || errs[4] != nil {
		t.Errorf("reordered %+v, errs %v", r, errs)
	}
}
