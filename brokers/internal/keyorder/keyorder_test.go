package keyorder

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
)

func keyed(keys ...string) []*message.Message {
	msgs := make([]*message.Message, len(keys))
	for i, k := range keys {
		msgs[i] = message.NewMessage(fmt.Sprint(i), nil)
		msgs[i].Metadata.Set("key", k)
	}
	return msgs
}

// TestWavesHoldTheKthMessageOfEveryKey: wave k has the k-th message of each key, in input order.
func TestWavesHoldTheKthMessageOfEveryKey(t *testing.T) {
	got := fmt.Sprint(Waves(keyed("a", "b", "a", "c", "a", "b"), "key"))
	if want := "[[0 1 3] [2 5] [4]]"; got != want {
		t.Fatalf("Waves = %s, want %s", got, want)
	}
}

// TestCallFailureStopsItsKeyOnly: a failed message marks its key, not the others.
func TestCallFailureStopsItsKeyOnly(t *testing.T) {
	msgs := keyed("a", "b", "a")
	errs := make([]error, len(msgs))
	c := NewCall(msgs, errs, "key")
	boom := errors.New("boom")
	c.Fail(0, boom)
	if !c.KeyFailed(2) || c.KeyFailed(1) || errs[0] != boom {
		t.Fatalf("after Fail(0): KeyFailed(2) %v, KeyFailed(1) %v, errs[0] %v", c.KeyFailed(2), c.KeyFailed(1), errs[0])
	}
	if len(c.Acked) != 3 || UUIDOf(nil) != "" || UUIDOf(msgs[1]) != "1" {
		t.Fatal("Acked sized to the messages, UUIDOf of nil empty")
	}
	Fill(errs, boom)
	for i, err := range errs {
		if err != boom {
			t.Fatalf("Fill: errs[%d] = %v", i, err)
		}
	}
}
