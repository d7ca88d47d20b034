package relay

import (
	"github.com/outboxkit/outboxkit/outbox"
)

// LeasesOf returns, in a new slice (hold filters its argument in place, and the stream's lease
// reading is shared by the workers), the leases of the partitions records belong to; with units
// > 0 (ExactlyOnce), those of every partition of the records' transactional units.
func LeasesOf(leases []Lease, records []Record, units int) []Lease {
	var in [outbox.Partitions]bool
	for _, r := range records {
		if r.Partition >= 0 && r.Partition < outbox.Partitions {
			in[r.Partition] = true
		}
	}
	if units > 0 {
		var unit [outbox.Partitions]bool
		for p := range in {
			unit[p%units] = unit[p%units] || in[p]
		}
		for p := range in {
			in[p] = unit[p%units]
		}
	}
	out := make([]Lease, 0, min(len(leases), len(records)))
	for _, l := range leases {
		if l.Partition >= 0 && l.Partition < outbox.Partitions && in[l.Partition] {
			out = append(out, l)
		}
	}
	return out
}
