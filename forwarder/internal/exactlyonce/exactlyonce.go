// Package exactlyonce is the exactly-once delivery mode (docs/exactly-once.md). The partitions
// are grouped into transactional units (unit u holds the partitions p with p % units == u), each
// with a stable name, leased whole (lease.Units). A batch is published per unit in
// one broker transaction holding its events, its dead letters and a checkpoint listing its rows;
// only after the commit are the rows deleted (or marked), in the one fenced acknowledgement,
// with the checkpoint's mark (the acknowledger's AcknowledgeMarked capability). Opening a unit
// fences its earlier sessions in the broker and returns its last committed checkpoint, whose rows
// the opener deletes or marks (fenced by its own lease) before publishing anything, so a crash
// between the commit and the acknowledgement publishes nothing twice. A unit runs its
// transactions one after the other: it begins the next only after the rows of the last one are
// acknowledged, so at most its last checkpoint can name rows still in the table.
//
// The Deliverer owns the mode's state: the units, the table's installation identity, the unit
// count and the transactional-id prefix, both settled at start. It knows neither the forwarder
// nor the source that feeds it.
package exactlyonce

import (
	"context"
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder/internal/deadletter"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// Publisher publishes messages and a checkpoint in one broker transaction, with zombie fencing
// (forwarder.TransactionalPublisher, which documents the contract, is this interface).
type Publisher interface {
	message.Publisher
	OpenUnit(ctx context.Context, unit, checkpointTopic string, slot int) ([]byte, error)
	CommitUnit(ctx context.Context, unit string, topics []string, msgs []*message.Message, checkpoint []byte) ([]error, error)
	CloseUnit(unit string)
}

// Acknowledger is the capability of the one acknowledger (internal/ack) exactly-once delivery
// needs: the fenced acknowledgement that also records the units' checkpoints as cleaned.
type Acknowledger interface {
	AcknowledgeMarked(ctx context.Context, worker int, leases []relay.Lease, acked []relay.Record, settled []relay.Settlement,
		marks []relay.UnitMark, units int) (relay.Outcome, map[int]int, error)
}

// Config is what the deliverer needs of the forwarder's configuration.
type Config struct {
	// Units is the configured (or defaulted) unit count; UnitsConfigured says it was set, not
	// defaulted: a default gives way to the count the lease group recorded (resolveUnits).
	Units           int
	UnitsConfigured bool
	// IDPrefix names the units (their Kafka transactional.id); "" derives it at start from the
	// table's installation, its name and LeaseGroup.
	IDPrefix        string
	CheckpointTopic string
	LeaseGroup      string
	// Halt ends the relay on an error that waiting cannot mend (a unit count changed under it).
	Halt func(error)
	// UnitsSettled is called by Start when the unit count it settles is not Units (the lease
	// group's recorded count), before any lease is taken: the wiring makes it the share
	// policy's granule.
	UnitsSettled func(units int)
}

// Deliverer is the exactly-once relay.Deliverer.
type Deliverer struct {
	core    relay.Core
	txp     Publisher
	acker   Acknowledger
	settler *deadletter.Settler
	halt    func(error)
	// unitsSettled tells the wiring the unit count settled at start (Config.UnitsSettled).
	unitsSettled func(units int)

	checkpointTopic string
	leaseGroup      string
	unitsConfigured bool
	// units and prefix are settled by Start, before any lease is taken, and read only after.
	units  int
	prefix string
	// installation is the table's identity, read at start.
	installation string
	txUnits      txUnits
	// fence is the database side of a unit's opening (fencedOpening; a fake in unit tests).
	fence opening
}

// New returns the exactly-once deliverer over core: it publishes through txp, acknowledges
// through acker and settles failures with settler.
func New(core relay.Core, cfg Config, txp Publisher, acker Acknowledger, settler *deadletter.Settler) *Deliverer {
	d := &Deliverer{core: core, txp: txp, acker: acker, settler: settler, halt: cfg.Halt, unitsSettled: cfg.UnitsSettled,
		checkpointTopic: cfg.CheckpointTopic, leaseGroup: cfg.LeaseGroup, unitsConfigured: cfg.UnitsConfigured,
		units: cfg.Units, prefix: cfg.IDPrefix}
	if d.halt == nil {
		d.halt = func(error) {}
	}
	if d.unitsSettled == nil {
		d.unitsSettled = func(int) {}
	}
	d.fence = d.fencedOpening
	return d
}

// Start reads the table's installation identity, which names the units, and settles their count.
func (d *Deliverer) Start(ctx context.Context) error {
	if err := d.resolveInstallation(ctx); err != nil {
		return err
	}
	return d.resolveUnits(ctx)
}

// Units is the unit count (the lease group's, once Start has settled it).
func (d *Deliverer) Units() int { return d.units }

// Prefix is the units' transactional-id prefix (derived by Start unless configured).
func (d *Deliverer) Prefix() string { return d.prefix }

// Installation is the table's installation identity (read by Start).
func (d *Deliverer) Installation() string { return d.installation }

// Ready opens the units the worker leases whole and returns their leases: the rows of a unit
// leased in part wait until the heartbeat has settled its owner, and so do those of a unit whose
// last checkpoint is another installation's (refused: claiming them would only open the unit
// again and again, fencing the other installation, while the worker's other units wait).
func (d *Deliverer) Ready(ctx context.Context, worker int, leases []relay.Lease) ([]relay.Lease, error) {
	err := d.openLeasedUnits(ctx, worker, leases)
	var whole []relay.Lease
	for n, ls := range d.wholeUnitLeases(leases) {
		u := d.txUnits.get(n)
		u.mu.Lock()
		foreign := u.foreign
		u.mu.Unlock()
		if !foreign {
			whole = append(whole, ls...)
		}
	}
	return whole, err
}

// Scope returns the leases of every partition of the records' units.
func (d *Deliverer) Scope(leases []relay.Lease, records []relay.Record) []relay.Lease {
	return relay.LeasesOf(leases, records, d.units)
}

// ErrNotLeasedWhole: a delivery has a record of a unit that is not leased whole (some of its
// partitions are being given up), which could be neither published nor left to a retry.
var ErrNotLeasedWhole = errors.New("this relay no longer owns every partition of a transactional unit")

// Deliver publishes the records in transactions of their units. A record whose unit is not
// leased whole stops the delivery with ErrNotLeasedWhole.
func (d *Deliverer) Deliver(ctx context.Context, worker int, leases []relay.Lease, records []relay.Record) (relay.Outcome, error) {
	whole := d.wholeUnitLeases(leases)
	for _, r := range records {
		if _, ok := whole[r.Partition%d.units]; !ok {
			return relay.Outcome{}, fmt.Errorf("%w: transactional unit %d is not leased whole", ErrNotLeasedWhole, r.Partition%d.units)
		}
	}
	return d.deliverTransactional(ctx, worker, leases, records)
}

// Stop closes every open unit (at shutdown, after the workers stopped).
func (d *Deliverer) Stop() { d.closeAllUnits() }

// LogAttrs names the delivery, the installation and the units' prefix.
func (d *Deliverer) LogAttrs() []any {
	return []any{"delivery", "exactly_once", "installation", d.installation, "transactional_id_prefix", d.prefix}
}
