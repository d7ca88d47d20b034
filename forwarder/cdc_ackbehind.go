package forwarder

import "context"

// ackBehind is a pipeline that can split a delivery: publish now, acknowledge later. The cdc
// stream's workers use it to admit and publish their next part while the fenced acknowledgement
// of the part before runs (cdc_pipeline.go says why order, parking and fencing hold).
// atLeastOnce is one; exactlyOnce is not (its acknowledgement belongs to its units'
// transactions and checkpoints).
type ackBehind interface {
	// publishAhead publishes records under leases. When the broker acknowledged every record,
	// it returns their acknowledgement still to run (ack) and nothing else is left to do:
	// nothing failed, nothing was held back. Otherwise it settles the failures and
	// acknowledges at once, as deliver does, and returns the outcome with a nil ack.
	publishAhead(ctx context.Context, worker int, leases []lease, records []record) (ack func() (outcome, error), o outcome, err error)
}

func (p atLeastOnce) publishAhead(ctx context.Context, worker int, leases []lease, records []record) (func() (outcome, error), outcome, error) {
	acked, settled := p.f.publishSettled(ctx, records)
	if len(settled) > 0 || len(acked) != len(records) {
		// A failure or a held-back record: its settlement and marks must be in the table before
		// the worker admits its next part, whose rows of the same key admit must then refuse.
		o, _, err := p.f.acknowledge(ctx, worker, leases, acked, settled)
		return nil, o, err
	}
	return func() (outcome, error) {
		o, _, err := p.f.acknowledge(ctx, worker, leases, acked, nil)
		return o, err
	}, outcome{}, nil
}

// cdcDeliverAhead is cdcDeliver for a part of the stream: when the pipeline can acknowledge
// behind and the broker acknowledged every record, it returns the acknowledgement still to run
// (finish), holding the part's leases (inflight) and its progress token until then.
func (f *Forwarder) cdcDeliverAhead(ctx context.Context, worker int, leases []lease, records []record) (finish func() error, err error) {
	ahead, ok := f.pipeline.(ackBehind)
	if !ok {
		return nil, f.cdcDeliver(ctx, worker, leases, records)
	}
	f.inflight.read(worker)
	held := f.inflight.hold(worker, f.pipeline.scope(leases, records))
	token := f.progress.begin()
	ack, o, err := ahead.publishAhead(ctx, worker, held, records)
	if ack == nil {
		defer f.inflight.end(held)
		f.delivered(token, o, err)
		return nil, f.markLeftovers(ctx, worker, held, records, o, err)
	}
	return func() error {
		defer f.inflight.end(held)
		o, err := ack()
		f.delivered(token, o, err)
		// Only rows of partitions the acknowledgement found lost can be left pending here, and
		// markRetry, fenced by the same epochs, finds them lost too: it marks nothing (no row a
		// later part of the worker may publish) and fails the part with errLeasesLost.
		return f.markLeftovers(ctx, worker, held, records, o, err)
	}, nil
}
