package cloudevents_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/outboxkit/outboxkit/brokers/cloudevents"
)

// classifyingRecorder is a recorder that classifies errors: "permanent" is not retriable.
type classifyingRecorder struct{ recorder }

var errPermanent = errors.New("permanent")

func (r *classifyingRecorder) Retriable(err error) bool { return !errors.Is(err, errPermanent) }

// The decorator forwards the wrapped publisher's error classifier (forwarder.ErrorClassifier),
// and classifies its own errors: a message that is not an event is permanent, a message not
// sent because of an earlier one retriable. A wrapped publisher without a classifier has every
// other error retriable.
func TestRetriableForwardsTheWrappedClassifier(t *testing.T) {
	type classifier interface{ Retriable(error) bool }
	wrapped, ok := newPublisher(t, &classifyingRecorder{}).(classifier)
	if !ok {
		t.Fatal("the decorator has no Retriable")
	}
	plain := newPublisher(t, &recorder{}).(classifier)
	cases := []struct {
		name          string
		err           error
		wrapped, bare bool
	}{
		{"not an event", fmt.Errorf("x: %w", cloudevents.ErrNotAnEvent), false, false},
		{"earlier invalid", fmt.Errorf("x: %w", cloudevents.ErrEarlierMessageInvalid), true, true},
		{"wrapped's permanent", fmt.Errorf("x: %w", errPermanent), false, true},
		{"other", errors.New("broker down"), true, true},
	}
	for _, tc := range cases {
		if got := wrapped.Retriable(tc.err); got != tc.wrapped {
			t.Errorf("%s: Retriable over a classifier = %v, want %v", tc.name, got, tc.wrapped)
		}
		if got := plain.Retriable(tc.err); got != tc.bare {
			t.Errorf("%s: Retriable over a plain publisher = %v, want %v", tc.name, got, tc.bare)
		}
	}
}
