package kafka

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestRetryUnknownTopicWaitsForANewTopic: a topic just created may be unknown to the broker
// asked for a moment; any other answer is returned at once.
func TestRetryUnknownTopicWaitsForANewTopic(t *testing.T) {
	calls := 0
	err := retryUnknownTopic(context.Background(), func() error {
		if calls++; calls < 3 {
			return kerr.UnknownTopicOrPartition
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("retryUnknownTopic: %v after %d calls, want nil after 3", err, calls)
	}
	other := errors.New("authorization failed")
	calls = 0
	if err := retryUnknownTopic(context.Background(), func() error { calls++; return other }); err != other || calls != 1 {
		t.Fatalf("retryUnknownTopic on another error: %v after %d calls, want it after 1", err, calls)
	}
}
