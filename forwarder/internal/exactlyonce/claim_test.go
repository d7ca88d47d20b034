package exactlyonce

import (
	"slices"
	"testing"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestExactlyOnceClaimPerUnit: under exactly-once delivery a worker claims BatchSize rows and
// MaxBatchBytes of payload for each of its units, and keeps of the claim, in sequence order, at
// most that much per unit, leaving the rest of a full unit (a sequence suffix of each of its
// partitions) pending.
func TestExactlyOnceClaimPerUnit(t *testing.T) {
	p := &Deliverer{units: 2, core: relay.Core{BatchSize: 2, MaxBatchBytes: 10}}
	rows, bytes := p.ClaimLimits([]relay.Lease{{Partition: 0}, {Partition: 2}, {Partition: 1}})
	if rows != 4 || bytes != 20 {
		t.Fatalf("claimLimits for 2 units = %d rows, %d bytes; want 4, 20", rows, bytes)
	}
	if rows, bytes := p.ClaimLimits([]relay.Lease{{Partition: 0}, {Partition: 2}}); rows != 2 || bytes != 10 {
		t.Fatalf("claimLimits for 1 unit = %d rows, %d bytes; want 2, 10", rows, bytes)
	}
	rec := func(seq int64, partition, size int) relay.Record {
		return relay.Record{Seq: seq, Partition: partition, Event: outbox.Event{Payload: make([]byte, size)}}
	}
	claimed := []relay.Record{
		rec(1, 0, 1), rec(2, 1, 8), rec(3, 2, 1), rec(4, 1, 8), // unit 1 is full by bytes at seq 4
		rec(5, 0, 1), rec(6, 1, 1), // unit 0 is full by rows at seq 5; unit 1 stays full: seq 6 is left too
		rec(7, 3, 20), // never reached: unit 1 is full
	}
	var kept []int64
	for _, r := range p.TrimClaim(claimed) {
		kept = append(kept, r.Seq)
	}
	if want := []int64{1, 2, 3}; !slices.Equal(kept, want) {
		t.Fatalf("kept %v, want %v", kept, want)
	}
	// A unit's first row is kept however large.
	if got := p.TrimClaim([]relay.Record{rec(1, 1, 50), rec(2, 1, 1)}); len(got) != 1 || got[0].Seq != 1 {
		t.Fatalf("a first row over MaxBatchBytes: kept %v, want seq 1 alone", got)
	}
}
