package lease

import (
	"fmt"
	"slices"
	"testing"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// unitOf returns the partitions of unit u of n units, in ascending order.
func unitOf(u, n int) []int {
	var out []int
	for p := u; p < outbox.Partitions; p += n {
		out = append(out, p)
	}
	return out
}

// desc names a policy in a failure message.
func desc(p relay.SharePolicy) string {
	switch p := p.(type) {
	case Units:
		return fmt.Sprintf("Units(%d)", int(p))
	case Target:
		return "Target{" + desc(p.SharePolicy) + "}"
	}
	return fmt.Sprintf("%T", p)
}

func TestShareCounts(t *testing.T) {
	cases := []struct {
		policy relay.SharePolicy
		relays int
		want   int
	}{
		{PerPartition{}, 0, 64}, // no relay counted yet: this one alone
		{PerPartition{}, 1, 64},
		{PerPartition{}, 2, 32},
		{PerPartition{}, 3, 22}, // rounded up: 22+22+20
		{PerPartition{}, 64, 1},
		{PerPartition{}, 100, 1},
		{Units(8), 0, 64},
		{Units(8), 1, 64},
		{Units(8), 3, 24}, // 3 units of 8 partitions: 24+24+16
		{Units(8), 8, 8},
		{Units(8), 10, 8}, // a unit is never split: 2 relays hold nothing
		{Units(64), 3, 22},
		{Units(1), 2, 64}, // one unit: one relay holds everything
		{Target{PerPartition{}, func(int) int { return outbox.Partitions }}, 3, 64},
		{Target{Units(8), func(int) int { return 0 }}, 1, 0},
	}
	for _, c := range cases {
		if got := c.policy.Share(c.relays); got != c.want {
			t.Errorf("%s.Share(%d) = %d, want %d", desc(c.policy), c.relays, got, c.want)
		}
	}
}

// TestSharesCoverThePartitions: with the equal-share policies, every partition has a relay that
// aims at it, and a unit's share is made of whole units.
func TestSharesCoverThePartitions(t *testing.T) {
	for _, p := range []relay.SharePolicy{PerPartition{}, Units(1), Units(2), Units(8), Units(16), Units(64)} {
		for relays := 1; relays <= outbox.Partitions+1; relays++ {
			share := p.Share(relays)
			if share*relays < outbox.Partitions {
				t.Errorf("%s: %d relays with a share of %d leave partitions to nobody", desc(p), relays, share)
			}
			if n, ok := p.(Units); ok && share%(outbox.Partitions/int(n)) != 0 {
				t.Errorf("%s: a share of %d among %d relays is not whole units", desc(p), share, relays)
			}
		}
	}
}

func TestWholeGranules(t *testing.T) {
	// All of unit 2 and unit 0 (of 8, listed out of order), and half of unit 5.
	unit2, unit0, unit5 := unitOf(2, 8), unitOf(0, 8), unitOf(5, 8)
	listed := slices.Concat(unit2, unit5[:4], unit0)
	whole, partial := Units(8).Whole(listed)
	if want := slices.Concat(unit0, unit2); !slices.Equal(whole, want) {
		t.Errorf("Units(8).Whole: whole %v, want %v (the whole units, unit by unit)", whole, want)
	}
	if want := unit5[:4]; !slices.Equal(partial, want) {
		t.Errorf("Units(8).Whole: partial %v, want %v", partial, want)
	}

	whole, partial = PerPartition{}.Whole(listed)
	if !slices.Equal(whole, listed) || partial != nil {
		t.Errorf("PerPartition.Whole = %v, %v; want the partitions as listed, nothing partial", whole, partial)
	}
	whole, partial = Target{Units(8), func(int) int { return 0 }}.Whole(listed)
	if !slices.Equal(whole, slices.Concat(unit0, unit2)) || !slices.Equal(partial, unit5[:4]) {
		t.Errorf("Target over Units(8).Whole = %v, %v; want Units(8)'s", whole, partial)
	}

	if whole, partial := Units(8).Whole(nil); whole != nil || partial != nil {
		t.Errorf("Units(8).Whole(nil) = %v, %v", whole, partial)
	}
	all := make([]int, outbox.Partitions)
	for p := range all {
		all[p] = p
	}
	if whole, partial := Units(1).Whole(all); len(whole) != outbox.Partitions || partial != nil {
		t.Errorf("Units(1).Whole(all) = %d whole, %v partial", len(whole), partial)
	}
	if whole, partial := Units(1).Whole(all[1:]); whole != nil || len(partial) != outbox.Partitions-1 {
		t.Errorf("Units(1).Whole(all but one) = %v whole, %d partial", whole, len(partial))
	}
}

func TestCandidates(t *testing.T) {
	for _, c := range []struct {
		policy  relay.SharePolicy
		n, want int
	}{
		{PerPartition{}, 3, 3},
		{Units(8), 8, outbox.Partitions}, // whole units are picked among all the free partitions
		{Target{PerPartition{}, func(int) int { return outbox.Partitions }}, 5, 5},
		{Target{Units(8), func(int) int { return outbox.Partitions }}, 5, outbox.Partitions},
	} {
		if got := c.policy.Candidates(c.n); got != c.want {
			t.Errorf("%s.Candidates(%d) = %d, want %d", desc(c.policy), c.n, got, c.want)
		}
	}
}

func TestIncoming(t *testing.T) {
	all := func(int) int { return outbox.Partitions }
	cases := []struct {
		policy relay.SharePolicy
		held   relay.Holding
		want   bool
	}{
		{PerPartition{}, relay.Holding{Owned: 0, Share: 22, Relays: 3}, true},   // a new relay, the others above their shares
		{PerPartition{}, relay.Holding{Owned: 10, Share: 22, Relays: 3}, true},  // half-way through the move
		{PerPartition{}, relay.Holding{Owned: 20, Share: 22, Relays: 3}, false}, // below only by rounding (22+22+20)
		{PerPartition{}, relay.Holding{Owned: 32, Share: 32, Relays: 2}, false}, // at its share
		{PerPartition{}, relay.Holding{Owned: 40, Share: 32, Relays: 2}, false}, // above it
		{PerPartition{}, relay.Holding{Owned: 60, Share: 64, Relays: 1}, true},  // a lone relay missing partitions
		{PerPartition{}, relay.Holding{Owned: 0, Share: 64, Relays: 0}, false},  // no holding (a failed heartbeat)
		{Units(8), relay.Holding{Owned: 0, Share: 24, Relays: 3}, true},         // a new relay
		{Units(8), relay.Holding{Owned: 16, Share: 24, Relays: 3}, false},       // below only by rounding (24+24+16)
		{Target{PerPartition{}, all}, relay.Holding{Owned: 0, Share: 64, Relays: 2}, false},
		{Target{Units(8), all}, relay.Holding{Owned: 0, Share: 64, Relays: 1}, false},
	}
	for _, c := range cases {
		if got := c.policy.Incoming(c.held); got != c.want {
			t.Errorf("%s.Incoming(%+v) = %v, want %v", desc(c.policy), c.held, got, c.want)
		}
	}
}

func ExampleUnits() {
	share := Units(8)
	whole, partial := share.Whole(slices.Concat(unitOf(3, 8), []int{1, 9}))
	fmt.Println(share.Share(3), whole, partial)
	// Output: 24 [3 11 19 27 35 43 51 59] [1 9]
}
