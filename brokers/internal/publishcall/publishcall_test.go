package publishcall

import (
	"errors"
	"fmt"
	"slices"
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

// TestCallFailureStopsItsKeyOnly: the waves hold the k-th message of each key by the metadata
// key (a nil message has the key ""); a failed message holds back the later ones of its key,
// not the others.
func TestCallFailureStopsItsKeyOnly(t *testing.T) {
	msgs := append(keyed("a", "b", "a", "b"), nil, nil)
	errs := make([]error, len(msgs))
	c := New(msgs, errs, "key")
	boom := errors.New("boom")
	var sent [][]int
	var held []int
	c.Waves(func(wave []int) bool {
		sent = append(sent, slices.Clone(wave))
		if wave[0] == 0 {
			c.Fail(0, boom)
		}
		return true
	}, func(i int) { held = append(held, i) })
	if got, want := fmt.Sprint(sent, held), "[[0 1 4] [3 5]] [2]"; got != want {
		t.Fatalf("sent, held = %s, want %s", got, want)
	}
	if errs[0] != boom || c.Key(4) != "" || c.Key(1) != "b" {
		t.Fatalf("errs[0] %v, Key(4) %q, Key(1) %q", errs[0], c.Key(4), c.Key(1))
	}
	if len(c.Acked) != len(msgs) || UUIDOf(nil) != "" || UUIDOf(msgs[1]) != "1" {
		t.Fatal("Acked sized to the messages, UUIDOf of nil empty")
	}
	Fill(errs, boom)
	for i, err := range errs {
		if err != boom {
			t.Fatalf("Fill: errs[%d] = %v", i, err)
		}
	}
}
