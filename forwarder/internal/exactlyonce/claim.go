package exactlyonce

import "github.com/outboxkit/outboxkit/forwarder/internal/relay"

// How much a polling worker claims at once under exactly-once delivery. A transaction costs the
// broker about the same whatever it holds (coordinator log writes, a marker on every partition
// it touched, and on a replicated cluster their replication), so a worker that is behind fills
// each of its units' transactions: BatchSize and MaxBatchBytes bound one unit's transaction
// (its checkpoint lists at most BatchSize rows), and a worker claims up to that for each unit it
// serves at once. At least once, they bound the whole claim.

// ClaimLimits returns the rows and payload bytes a worker claims at once for the ready leases:
// BatchSize and MaxBatchBytes for each unit among them.
func (d *Deliverer) ClaimLimits(ready []relay.Lease) (int, int64) {
	units := map[int]bool{}
	for _, l := range ready {
		units[l.Partition%d.units] = true
	}
	n := max(len(units), 1)
	return d.core.BatchSize * n, d.core.MaxBatchBytes * int64(n)
}

// TrimClaim keeps, of records claimed in sequence order, the first BatchSize rows of each unit
// within MaxBatchBytes of payload (a unit's first row always). Once a unit is full its later rows
// are all left, so what is left of each partition, and therefore of each key, is the end of its
// sequence: the rows stay pending and are claimed again, after the ones kept.
func (d *Deliverer) TrimClaim(records []relay.Record) []relay.Record {
	type fill struct {
		rows  int
		bytes int64
		full  bool
	}
	units := map[int]*fill{}
	kept := records[:0:0]
	for _, r := range records {
		u := units[r.Partition%d.units]
		if u == nil {
			u = &fill{}
			units[r.Partition%d.units] = u
		}
		size := int64(len(r.Event.Payload))
		if u.full || (u.rows > 0 && (u.rows >= d.core.BatchSize || u.bytes+size > d.core.MaxBatchBytes)) {
			u.full = true
			continue
		}
		u.rows++
		u.bytes += size
		kept = append(kept, r)
	}
	return kept
}
