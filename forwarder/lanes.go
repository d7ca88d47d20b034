package forwarder

// lane is the share of a polling worker's leases that one of its claim loops serves: every
// partition of the worker (units 0), or the partitions of one transactional unit. Under at least
// once a worker runs one loop; under exactly-once it runs one loop per unit it serves, so that
// each unit claims, commits and acknowledges on its own. A unit runs one transaction at a time,
// and a transaction cannot begin before the commit markers of its unit's previous one are
// written; loops of their own keep a unit from also waiting for its siblings' transactions, the
// slowest of which used to hold back every unit of the worker.
type lane struct {
	worker int
	units  int // TransactionalUnits when the lane serves one unit; 0 when it serves the worker
	unit   int
}

// of keeps the leases of the lane's partitions.
func (l lane) of(leases []lease) []lease {
	if l.units == 0 {
		return leases
	}
	var kept []lease
	for _, ls := range leases {
		if ls.partition%l.units == l.unit {
			kept = append(kept, ls)
		}
	}
	return kept
}

// unitLanes returns one lane per transactional unit of the worker: units u with
// u % workers == worker, whose partitions are all the worker's (units is a multiple of workers).
func unitLanes(worker, workers, units int) []lane {
	var lanes []lane
	for u := worker; u < units; u += workers {
		lanes = append(lanes, lane{worker: worker, units: units, unit: u})
	}
	return lanes
}
