package forwarder

import (
	"context"
	"fmt"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// exactlyOnce publishes each batch in Kafka transactions, one per transactional unit, with a
// checkpoint (transactional.go).
type exactlyOnce struct{ f *Forwarder }

// start reads the table's installation identity, which names the units, and settles their count.
func (p exactlyOnce) Start(ctx context.Context) error {
	if err := p.f.resolveInstallation(ctx); err != nil {
		return err
	}
	return p.f.resolveUnits(ctx)
}

// ready opens the units the worker leases whole and returns their leases: the rows of a unit
// leased in part wait until the heartbeat has settled its owner, and so do those of a unit whose
// last checkpoint is another installation's (refused: claiming them would only open the unit
// again and again, fencing the other installation, while the worker's other units wait).
func (p exactlyOnce) Ready(ctx context.Context, worker int, leases []relay.Lease) ([]relay.Lease, error) {
	err := p.f.openLeasedUnits(ctx, worker, leases)
	var whole []relay.Lease
	for n, ls := range p.f.wholeUnitLeases(leases) {
		u := p.f.units.get(n)
		u.mu.Lock()
		foreign := u.foreign
		u.mu.Unlock()
		if !foreign {
			whole = append(whole, ls...)
		}
	}
	return whole, err
}

// scope returns the leases of every partition of the records' units.
func (p exactlyOnce) Scope(leases []relay.Lease, records []relay.Record) []relay.Lease {
	return relay.LeasesOf(leases, records, p.f.cfg.TransactionalUnits)
}

// deliver publishes the records in transactions of their units. A record whose unit is not
// leased whole (some of its partitions are being given up) could be neither published nor left
// to a retry, so it stops the delivery with errLeasesLost.
func (p exactlyOnce) Deliver(ctx context.Context, worker int, leases []relay.Lease, records []relay.Record) (relay.Outcome, error) {
	units := p.f.cfg.TransactionalUnits
	whole := p.f.wholeUnitLeases(leases)
	for _, r := range records {
		if _, ok := whole[r.Partition%units]; !ok {
			return relay.Outcome{}, fmt.Errorf("%w: transactional unit %d is not leased whole", errLeasesLost, r.Partition%units)
		}
	}
	return p.f.deliverTransactional(ctx, worker, leases, records)
}

func (p exactlyOnce) Stop() { p.f.closeAllUnits() }

func (p exactlyOnce) LogAttrs() []any {
	return []any{"delivery", ExactlyOnce, "installation", p.f.installation, "transactional_id_prefix", p.f.cfg.TransactionalIDPrefix}
}
