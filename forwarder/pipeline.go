package forwarder

import (
	"context"
	"fmt"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// pipeline is a delivery mode: it publishes the records a source hands it and acknowledges the
// outcome through the one fenced acknowledgement. New picks one from Config.Delivery
// (newPipeline); the sources and the Forwarder's loops use it without knowing which.
type pipeline interface {
	// start prepares the pipeline before the first lease is taken.
	start(ctx context.Context) error
	// ready prepares a worker's leases for publishing and returns those whose records may be
	// published now. An error is logged by the pipeline; the leases returned are usable anyway.
	ready(ctx context.Context, worker int, leases []relay.Lease) ([]relay.Lease, error)
	// claimLimits returns the rows and payload bytes a polling worker claims at once for the
	// ready leases, and trimClaim what of a claim (in sequence order) one delivery takes: a
	// sequence-order prefix of each partition's rows, the rest staying pending.
	claimLimits(ready []relay.Lease) (int, int64)
	trimClaim(records []relay.Record) []relay.Record
	// scope returns the leases a delivery of records must hold and fence, out of leases (all of
	// the relay's).
	scope(leases []relay.Lease, records []relay.Record) []relay.Lease
	// deliver publishes records under leases, settles the failures and acknowledges the outcome.
	deliver(ctx context.Context, worker int, leases []relay.Lease, records []relay.Record) (relay.Outcome, error)
	// stop releases what the pipeline holds once no delivery runs.
	stop()
	// logAttrs are the pipeline's attributes for the forwarder's start-up log line.
	logAttrs() []any
}

// newPipeline returns the pipeline of the configured delivery. It and New's choice of source
// are the only readers of Config.Delivery and Config.Source outside validation.
func newPipeline(f *Forwarder) pipeline {
	if f.cfg.Delivery == ExactlyOnce {
		f.txp = f.cfg.Publisher.(TransactionalPublisher) // checked by Validate
		f.share.Units = f.cfg.TransactionalUnits
		return exactlyOnce{f}
	}
	return atLeastOnce{f}
}

// atLeastOnce publishes each batch and acknowledges what the broker acknowledged
// (forwarder.go's deliver).
type atLeastOnce struct{ f *Forwarder }

func (atLeastOnce) start(context.Context) error { return nil }

func (atLeastOnce) ready(_ context.Context, _ int, leases []relay.Lease) ([]relay.Lease, error) {
	return leases, nil
}

func (p atLeastOnce) claimLimits([]relay.Lease) (int, int64) {
	return p.f.cfg.BatchSize, p.f.cfg.MaxBatchBytes
}

func (atLeastOnce) trimClaim(records []relay.Record) []relay.Record { return records }

func (atLeastOnce) scope(leases []relay.Lease, records []relay.Record) []relay.Lease {
	return leasesOf(leases, records, 0)
}

func (p atLeastOnce) deliver(ctx context.Context, worker int, leases []relay.Lease, records []relay.Record) (relay.Outcome, error) {
	return p.f.deliver(ctx, worker, leases, records)
}

func (atLeastOnce) stop() {}

func (atLeastOnce) logAttrs() []any { return []any{"delivery", AtLeastOnce} }

// exactlyOnce publishes each batch in Kafka transactions, one per transactional unit, with a
// checkpoint (transactional.go).
type exactlyOnce struct{ f *Forwarder }

// start reads the table's installation identity, which names the units, and settles their count.
func (p exactlyOnce) start(ctx context.Context) error {
	if err := p.f.resolveInstallation(ctx); err != nil {
		return err
	}
	return p.f.resolveUnits(ctx)
}

// ready opens the units the worker leases whole and returns their leases: the rows of a unit
// leased in part wait until the heartbeat has settled its owner, and so do those of a unit whose
// last checkpoint is another installation's (refused: claiming them would only open the unit
// again and again, fencing the other installation, while the worker's other units wait).
func (p exactlyOnce) ready(ctx context.Context, worker int, leases []relay.Lease) ([]relay.Lease, error) {
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
func (p exactlyOnce) scope(leases []relay.Lease, records []relay.Record) []relay.Lease {
	return leasesOf(leases, records, p.f.cfg.TransactionalUnits)
}

// deliver publishes the records in transactions of their units. A record whose unit is not
// leased whole (some of its partitions are being given up) could be neither published nor left
// to a retry, so it stops the delivery with errLeasesLost.
func (p exactlyOnce) deliver(ctx context.Context, worker int, leases []relay.Lease, records []relay.Record) (relay.Outcome, error) {
	units := p.f.cfg.TransactionalUnits
	whole := p.f.wholeUnitLeases(leases)
	for _, r := range records {
		if _, ok := whole[r.Partition%units]; !ok {
			return relay.Outcome{}, fmt.Errorf("%w: transactional unit %d is not leased whole", errLeasesLost, r.Partition%units)
		}
	}
	return p.f.deliverTransactional(ctx, worker, leases, records)
}

func (p exactlyOnce) stop() { p.f.closeAllUnits() }

func (p exactlyOnce) logAttrs() []any {
	return []any{"delivery", ExactlyOnce, "installation", p.f.installation, "transactional_id_prefix", p.f.cfg.TransactionalIDPrefix}
}
