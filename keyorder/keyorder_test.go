package keyorder

import (
	"fmt"
	"slices"
	"testing"
)

// rounds returns the rounds Run hands to send, nothing failing.
func rounds[K comparable](p *Plan[K]) [][]int {
	var out [][]int
	p.Run(func(round []int) bool {
		out = append(out, slices.Clone(round))
		return true
	}, func(i int) { panic(fmt.Sprintf("message %d held without a failure", i)) })
	return out
}

// TestWavesHoldTheKthMessageOfEveryKey: round k has the k-th message of each key, in input order.
func TestWavesHoldTheKthMessageOfEveryKey(t *testing.T) {
	got := fmt.Sprint(rounds(Waves([]string{"a", "b", "a", "c", "a", "b"})))
	if want := "[[0 1 3] [2 5] [4]]"; got != want {
		t.Fatalf("Waves = %s, want %s", got, want)
	}
	if got := rounds(Waves([]int64(nil))); len(got) != 0 {
		t.Fatalf("Waves of no messages = %v, want no round", got)
	}
}

// TestSegmentsCutOnlyWhereAsked: a key's messages share a round until cut; each cut puts the
// key's next messages one round later, whatever the other keys do.
func TestSegmentsCutOnlyWhereAsked(t *testing.T) {
	keys := []string{"a", "b", "a", "a", "b", "a"}
	topics := []string{"x", "x", "x", "y", "y", "y"}
	p := Segments(keys, func(prev, next int) bool { return topics[prev] != topics[next] })
	if got, want := fmt.Sprint(rounds(p)), "[[0 1 2] [3 4 5]]"; got != want {
		t.Fatalf("Segments = %s, want %s", got, want)
	}
	topics = []string{"x", "x", "y", "x", "x", "x"}
	p = Segments(keys, func(prev, next int) bool { return topics[prev] != topics[next] })
	if got, want := fmt.Sprint(rounds(p)), "[[0 1 4] [2] [3 5]]"; got != want {
		t.Fatalf("Segments = %s, want %s", got, want)
	}
}

// TestRunHoldsBackAStoppedKeyOnly: after a failure of key a in round 0, a's later messages go to
// held, not to send, while b goes on until its own failure in round 1; the last round, left
// empty, is not sent.
func TestRunHoldsBackAStoppedKeyOnly(t *testing.T) {
	p := Waves([]string{"a", "b", "a", "b", "a"})
	var sent [][]int
	var held []int
	p.Run(func(round []int) bool {
		sent = append(sent, slices.Clone(round))
		for _, i := range round {
			if i == 0 || i == 3 {
				p.Stop(p.Key(i))
			}
		}
		return true
	}, func(i int) { held = append(held, i) })
	if got, want := fmt.Sprint(sent, held), "[[0 1] [3]] [2 4]"; got != want {
		t.Fatalf("sent, held = %s, want %s", got, want)
	}
}

// TestRunEndsWhenSendSaysSo: send reporting false ends the run: no later round is sent or held.
func TestRunEndsWhenSendSaysSo(t *testing.T) {
	p := Waves([]string{"a", "a", "a"})
	calls := 0
	p.Run(func([]int) bool { calls++; return false }, func(i int) { t.Fatalf("message %d held", i) })
	if calls != 1 {
		t.Fatalf("send called %d times, want 1", calls)
	}
}
