package exactlyonce

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/forwarder/internal/deadletter"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// Unit tests of the deliverer with a fake transactional publisher (fakeTx), a fake
// acknowledger (fakeAcker) and a fake of the opening's fenced transaction: no database, no
// broker. The same paths against Kafka and the databases: brokers/kafka's exactly-once tests.

var errTooLarge = errors.New("too large")

// newTestDeliverer returns a deliverer of units units over txp and acker whose openings always
// hold their leases and find nothing to clean up, unless recovered names rows of a checkpoint
// found at the opening. MaxAttempts is 3; errTooLarge is permanent.
func newTestDeliverer(t *testing.T, units int, txp *fakeTx, acker *fakeAcker, recovered map[int64]bool) *Deliverer {
	t.Helper()
	m, err := relay.NewMetrics(nil, "events")
	if err != nil {
		t.Fatal(err)
	}
	core := relay.Core{RelayID: "relay-a", Workers: 1, BatchSize: 100, MaxBatchBytes: 1 << 20, LeaseTTL: time.Minute,
		DeadLetterTopic: "dead", Metrics: m, Log: slog.New(slog.DiscardHandler),
		Retry: relay.RetryPolicy{MaxAttempts: 3, Retriable: func(err error) bool { return !errors.Is(err, errTooLarge) },
			Initial: time.Second, MaxInterval: time.Second, Multiplier: 1}}
	d := New(core, Config{Units: units, IDPrefix: "test", CheckpointTopic: "checkpoints", LeaseGroup: "g"}, txp, acker,
		deadletter.NewSettler(core, nil))
	d.installation = "installation-a" // read by Start from the table
	d.fence = func(context.Context, string, []relay.Lease, *txUnit, bool, bookkeeping.Checkpoint, []byte) (bool, map[int64]bool, int, error) {
		return false, recovered, 0, nil
	}
	return d
}

// allLeases are the leases of every partition.
func allLeases() []relay.Lease {
	leases := make([]relay.Lease, outbox.Partitions)
	for p := range leases {
		leases[p] = relay.Lease{Partition: p, Epoch: 1}
	}
	return leases
}

func rec(seq int64, key string, partition int) relay.Record {
	return relay.Record{Seq: seq, KeyHash: outbox.KeyHash("", "order", key), Partition: partition,
		Event: outbox.Event{ID: uuid.New(), Topic: "orders", AggregateType: "order", AggregateID: key, EventType: "placed",
			Payload: []byte(`{"key":"` + key + `"}`)}}
}

func seqs[T any](xs []T, seq func(T) int64) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = seq(x)
	}
	slices.Sort(out)
	return out
}

func recordSeq(r relay.Record) int64         { return r.Seq }
func settledSeq(s relay.Settlement) int64    { return s.Record.Seq }
func rowSeq(r bookkeeping.RowRef) int64      { return r.Seq }
func deadRowSeq(r bookkeeping.DeadRow) int64 { return r.Seq }

// refuseOn fails, with err, the messages of topic whose event is one of records (a dead letter
// carries its event's UUID).
func refuseOn(topic string, err error, records ...relay.Record) func(string, *message.Message) error {
	return func(t string, m *message.Message) error {
		for _, r := range records {
			if t == topic && m.UUID == r.Event.ID.String() {
				return err
			}
		}
		return nil
	}
}

// TestDeliverCommitsOneTransactionPerUnitWithItsCheckpoint: a batch over two units is two
// transactions, each with its unit's events and a checkpoint naming their rows; one
// acknowledgement takes every row and marks both checkpoints, which the units remember as
// cleaned.
func TestDeliverCommitsOneTransactionPerUnitWithItsCheckpoint(t *testing.T) {
	txp, acker := &fakeTx{}, &fakeAcker{}
	d := newTestDeliverer(t, 2, txp, acker, nil)
	records := []relay.Record{rec(1, "a", 0), rec(2, "b", 1), rec(3, "c", 2)}
	o, err := d.Deliver(context.Background(), 0, allLeases(), records)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Acked) != 3 || acker.calls != 1 || len(acker.settled) != 0 {
		t.Fatalf("outcome %+v after %d acknowledgements (settled %v), want the 3 rows acknowledged once", o, acker.calls, acker.settled)
	}
	if len(txp.commits) != 2 {
		t.Fatalf("%d transactions, want one per unit", len(txp.commits))
	}
	want := map[string][]int64{"test/u00": {1, 3}, "test/u01": {2}}
	for _, c := range txp.commits {
		cp, err := bookkeeping.DecodeCheckpoint(c.unit, c.checkpoint)
		if err != nil {
			t.Fatal(err)
		}
		if got := seqs(cp.Rows, rowSeq); !slices.Equal(got, want[c.unit]) || cp.Unit != c.unit || cp.Relay != "relay-a" ||
			cp.Installation != "installation-a" {
			t.Errorf("unit %s committed a checkpoint of %s by %s with rows %v, want rows %v", c.unit, cp.Unit, cp.Relay, got, want[c.unit])
		}
		if len(c.msgs) != len(want[c.unit]) || slices.ContainsFunc(c.topics, func(topic string) bool { return topic != "orders" }) {
			t.Errorf("unit %s committed %d messages to %v, want %d to orders", c.unit, len(c.msgs), c.topics, len(want[c.unit]))
		}
	}
	if len(acker.marks) != 2 {
		t.Fatalf("marks %+v, want one per committed unit", acker.marks)
	}
	for _, m := range acker.marks {
		if m.Digest != relay.CheckpointDigest(txp.last[m.Name]) || m.Name != d.unitName(m.Unit) {
			t.Errorf("mark %+v does not name its unit's committed checkpoint", m)
		}
		if u := d.txUnits.get(m.Unit); string(u.cleaned) != string(txp.last[m.Name]) || !u.open {
			t.Errorf("unit %d after its acknowledgement: open %v, cleaned %q; want open, its checkpoint cleaned", m.Unit, u.open, u.cleaned)
		}
	}
}

// TestDeliverDropsAFailedKeyFromTheTransaction: an event that fails aborts its unit's
// transaction; it is retried later (its key parked behind it: the key's later event is neither
// published nor settled), and the unit, opened again, commits the rest.
func TestDeliverDropsAFailedKeyFromTheTransaction(t *testing.T) {
	records := []relay.Record{rec(1, "a", 0), rec(2, "b", 2), rec(3, "a", 0)}
	txp, acker := &fakeTx{refuse: refuseOn("orders", errors.New("broker busy"), records[0])}, &fakeAcker{}
	d := newTestDeliverer(t, 2, txp, acker, nil)
	if _, err := d.Deliver(context.Background(), 0, allLeases(), records); err != nil {
		t.Fatal(err)
	}
	if got := seqs(acker.acked, recordSeq); !slices.Equal(got, []int64{2}) {
		t.Fatalf("acknowledged %v, want [2]", got)
	}
	if len(acker.settled) != 1 || acker.settled[0].Record.Seq != 1 || acker.settled[0].Dead || acker.settled[0].Attempts != 1 ||
		acker.settled[0].Reason != "broker busy" || !acker.settled[0].Next.After(time.Now()) {
		t.Fatalf("settled %+v, want seq 1 retried later after 1 attempt", acker.settled)
	}
	if len(txp.commits) != 1 || txp.opens != 2 {
		t.Fatalf("%d commits after %d openings, want 1 after 2 (the abort closes the session)", len(txp.commits), txp.opens)
	}
}

// TestDeliverDeadLettersAPermanentFailureInTheNextTransaction: an event refused for good goes
// dead in the unit's next transaction, as a whole dead letter beside the other events, and the
// checkpoint names it dead.
func TestDeliverDeadLettersAPermanentFailureInTheNextTransaction(t *testing.T) {
	records := []relay.Record{rec(1, "a", 0), rec(2, "b", 2)}
	txp, acker := &fakeTx{refuse: refuseOn("orders", errTooLarge, records[0])}, &fakeAcker{}
	d := newTestDeliverer(t, 2, txp, acker, nil)
	if _, err := d.Deliver(context.Background(), 0, allLeases(), records); err != nil {
		t.Fatal(err)
	}
	if len(acker.settled) != 1 || !acker.settled[0].Dead || acker.settled[0].Record.Seq != 1 || acker.settled[0].Reason != errTooLarge.Error() {
		t.Fatalf("settled %+v, want seq 1 dead with the broker's reason", acker.settled)
	}
	if len(txp.commits) != 1 {
		t.Fatalf("%d commits, want 1", len(txp.commits))
	}
	c := txp.commits[0]
	if !slices.Equal(c.topics, []string{"orders", "dead"}) {
		t.Fatalf("the transaction went to %v, want orders then the dead-letter topic", c.topics)
	}
	dl := c.msgs[1]
	if dl.Metadata.Get(middleware.PoisonedTopicKey) != "orders" || dl.Metadata.Get(deadletter.MetadataPayloadDropped) != "" ||
		string(dl.Payload) != string(records[0].Event.Payload) {
		t.Fatalf("dead letter %v %s, want the whole event from orders", dl.Metadata, dl.Payload)
	}
	cp, err := bookkeeping.DecodeCheckpoint(c.unit, c.checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqs(cp.Rows, rowSeq), []int64{2}) || !slices.Equal(seqs(cp.Dead, deadRowSeq), []int64{1}) {
		t.Fatalf("checkpoint rows %v, dead %v; want [2] and [1]", cp.Rows, cp.Dead)
	}
}

// TestDeliverSendsARefusedDeadLetterReduced: a dead letter the broker refuses whole goes reduced
// in the next transaction, and the event's reason says so, as on the at-least-once path
// (deadletter.Settler.Settle): the dead-letter sequence is one.
func TestDeliverSendsARefusedDeadLetterReduced(t *testing.T) {
	records := []relay.Record{rec(1, "a", 0), rec(2, "b", 2)}
	onOrders := refuseOn("orders", errTooLarge, records[0])
	txp, acker := &fakeTx{refuse: func(topic string, m *message.Message) error {
		if topic == "dead" && m.Metadata.Get(deadletter.MetadataPayloadDropped) == "" {
			return errTooLarge // the whole dead letter
		}
		return onOrders(topic, m)
	}}, &fakeAcker{}
	d := newTestDeliverer(t, 2, txp, acker, nil)
	if _, err := d.Deliver(context.Background(), 0, allLeases(), records); err != nil {
		t.Fatal(err)
	}
	if len(txp.commits) != 1 || len(txp.commits[0].msgs) != 2 || txp.commits[0].msgs[1].Metadata.Get(deadletter.MetadataPayloadDropped) == "" {
		t.Fatalf("commits %+v, want one with the event and the reduced dead letter", txp.commits)
	}
	want := deadletter.ReducedReason(errTooLarge.Error())
	if len(acker.settled) != 1 || !acker.settled[0].Dead || acker.settled[0].Reason != want {
		t.Fatalf("settled %+v, want seq 1 dead with reason %q", acker.settled, want)
	}
	cp, err := bookkeeping.DecodeCheckpoint(txp.commits[0].unit, txp.commits[0].checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Dead) != 1 || cp.Dead[0].Reason != want {
		t.Fatalf("checkpoint dead rows %+v, want seq 1 with reason %q (a cleanup after a crash writes it)", cp.Dead, want)
	}
}

// TestDeliverEndsDeadInTheTableWhenTheReducedDeadLetterIsRefused: a spent event (max_attempts
// used, and its dead letter failed once more alone since: past its budget) is not published
// again; its dead letter goes alone, reduced from the start; refused even so, it is dead in the
// table only, with a reason naming the refusal and the event's publishes (max_attempts) as its
// attempts, and the rest of the unit commits.
func TestDeliverEndsDeadInTheTableWhenTheReducedDeadLetterIsRefused(t *testing.T) {
	records := []relay.Record{rec(1, "a", 0), rec(2, "b", 2)}
	records[0].Attempts = 4 // MaxAttempts 3 spent, then one failed round of its dead letter alone
	eventSent := false
	txp, acker := &fakeTx{refuse: func(topic string, m *message.Message) error {
		if m.UUID != records[0].Event.ID.String() {
			return nil
		}
		if topic != "dead" {
			eventSent = true
		}
		return errTooLarge // the event, and its dead letter in any form
	}}, &fakeAcker{}
	d := newTestDeliverer(t, 2, txp, acker, nil)
	if _, err := d.Deliver(context.Background(), 0, allLeases(), records); err != nil {
		t.Fatal(err)
	}
	if eventSent {
		t.Error("the spent event was put in a transaction again")
	}
	if len(acker.settled) != 1 || !acker.settled[0].Dead || acker.settled[0].Attempts != 3 ||
		acker.settled[0].Reason != deadletter.RefusedReason(deadletter.SpentReason(3), "dead", errTooLarge) {
		t.Fatalf("settled %+v, want seq 1 dead in the table with 3 attempts, the refusal in its reason", acker.settled)
	}
	if got := seqs(acker.acked, recordSeq); !slices.Equal(got, []int64{2}) {
		t.Fatalf("acknowledged %v, want [2]", got)
	}
	if len(txp.commits) != 1 || len(txp.commits[0].msgs) != 1 {
		t.Fatalf("commits %+v, want one holding the other event alone", txp.commits)
	}
}

// TestDeliverSendsASpentEventsDeadLetterAlone: an event whose max_attempts are spent (its dead
// letter failed after the last one) is not published again: its dead letter goes whole in the
// unit's transaction, with outbox_attempts = max_attempts, and its key's later event waits
// (neither acknowledged nor settled).
func TestDeliverSendsASpentEventsDeadLetterAlone(t *testing.T) {
	records := []relay.Record{rec(1, "a", 0), rec(2, "b", 2), rec(3, "a", 0)}
	records[0].Attempts = 3
	txp, acker := &fakeTx{}, &fakeAcker{}
	d := newTestDeliverer(t, 2, txp, acker, nil)
	if _, err := d.Deliver(context.Background(), 0, allLeases(), records); err != nil {
		t.Fatal(err)
	}
	if len(acker.settled) != 1 || !acker.settled[0].Dead || acker.settled[0].Record.Seq != 1 || acker.settled[0].Attempts != 3 {
		t.Fatalf("settled %+v, want seq 1 dead with 3 attempts", acker.settled)
	}
	if got := seqs(acker.acked, recordSeq); !slices.Equal(got, []int64{2}) {
		t.Fatalf("acknowledged %v, want [2] (seq 3 waits behind the dead one)", got)
	}
	var sent []string
	for _, c := range txp.commits {
		for i, m := range c.msgs {
			sent = append(sent, c.topics[i]+"/"+m.Metadata.Get(outbox.MetadataAggregateID))
			if c.topics[i] == "dead" && (m.Metadata.Get(deadletter.MetadataAttempts) != "3" || m.Metadata.Get(deadletter.MetadataPayloadDropped) != "") {
				t.Errorf("dead letter %v, want it whole with outbox_attempts 3", m.Metadata)
			}
		}
	}
	slices.Sort(sent)
	if !slices.Equal(sent, []string{"dead/a", "orders/b"}) {
		t.Fatalf("committed %v, want a's dead letter and b's event only", sent)
	}
}

// TestDeliverSkipsTheRowsOfTheRecoveredCheckpoint: the rows named by the checkpoint found when
// the unit was opened were published by its last transaction; they are neither sent nor
// settled again.
func TestDeliverSkipsTheRowsOfTheRecoveredCheckpoint(t *testing.T) {
	last, err := json.Marshal(bookkeeping.Checkpoint{Version: bookkeeping.CheckpointVersion, Installation: "installation-a", Unit: "test/u00", Relay: "relay-b", Txn: 9,
		Rows: []bookkeeping.RowRef{{Seq: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	txp, acker := &fakeTx{last: map[string][]byte{"test/u00": last}}, &fakeAcker{}
	d := newTestDeliverer(t, 2, txp, acker, map[int64]bool{1: true})
	if _, err := d.Deliver(context.Background(), 0, allLeases(), []relay.Record{rec(1, "a", 0), rec(2, "b", 2)}); err != nil {
		t.Fatal(err)
	}
	if got := seqs(acker.acked, recordSeq); !slices.Equal(got, []int64{2}) || len(acker.settled) != 0 {
		t.Fatalf("acknowledged %v, settled %v; want [2] alone", got, acker.settled)
	}
	if len(txp.commits) != 1 || len(txp.commits[0].msgs) != 1 || txp.commits[0].msgs[0].UUID == "" {
		t.Fatalf("commits %+v, want one holding seq 2 alone", txp.commits)
	}
}

// TestDeliverRefusesAUnitNotLeasedWhole: a record of a unit one of whose partitions this relay
// no longer leases stops the delivery before anything is opened or published.
func TestDeliverRefusesAUnitNotLeasedWhole(t *testing.T) {
	txp, acker := &fakeTx{}, &fakeAcker{}
	d := newTestDeliverer(t, 2, txp, acker, nil)
	leases := slices.DeleteFunc(allLeases(), func(l relay.Lease) bool { return l.Partition == 3 })
	_, err := d.Deliver(context.Background(), 0, leases, []relay.Record{rec(1, "a", 0), rec(2, "b", 1)})
	if !errors.Is(err, ErrNotLeasedWhole) {
		t.Fatalf("a record of unit 1 without partition 3: %v, want ErrNotLeasedWhole", err)
	}
	if txp.opens != 0 || len(txp.commits) != 0 || acker.calls != 0 {
		t.Fatalf("%d openings, %d commits, %d acknowledgements; want none", txp.opens, len(txp.commits), acker.calls)
	}
}

// TestReadyOpensTheUnitsLeasedWholeAndStopClosesThem: Ready opens the units the worker leases
// whole and returns their leases only, closes a unit it no longer leases whole, and Stop
// closes the rest.
func TestReadyOpensTheUnitsLeasedWholeAndStopClosesThem(t *testing.T) {
	txp := &fakeTx{}
	d := newTestDeliverer(t, 2, txp, &fakeAcker{}, nil)
	ctx := context.Background()
	ready, err := d.Ready(ctx, 0, allLeases())
	if err != nil || len(ready) != outbox.Partitions || txp.openSessions() != 2 {
		t.Fatalf("Ready on every lease: %d leases ready (%v), %d sessions open; want all, 2", len(ready), err, txp.openSessions())
	}
	partial := slices.DeleteFunc(allLeases(), func(l relay.Lease) bool { return l.Partition == 3 })
	ready, err = d.Ready(ctx, 0, partial)
	if err != nil || slices.ContainsFunc(ready, func(l relay.Lease) bool { return l.Partition%2 == 1 }) || len(ready) != outbox.Partitions/2 {
		t.Fatalf("Ready without partition 3: %d leases ready (%v), want unit 0's %d alone", len(ready), err, outbox.Partitions/2)
	}
	if txp.openSessions() != 1 || d.txUnits.get(1).open {
		t.Fatalf("%d sessions open after unit 1 lost a partition, want unit 0's alone", txp.openSessions())
	}
	d.Stop()
	if txp.openSessions() != 0 {
		t.Fatalf("%d sessions open after Stop", txp.openSessions())
	}
}

// TestDeliverLeavesAnUnavailableFailureUnblamed: an event whose failure is an outage (the
// policy's Unavailable: its schema registry did not answer) is neither settled nor counted: it
// stays pending with its key's later event, the other keys commit, and the delivery fails (the
// source backs off, the stall warning counts it), with outboxkit_forwarder_unavailable_total
// counting the event.
func TestDeliverLeavesAnUnavailableFailureUnblamed(t *testing.T) {
	errDown := errors.New("registry down")
	records := []relay.Record{rec(1, "a", 0), rec(2, "b", 2), rec(3, "a", 0)}
	txp, acker := &fakeTx{refuse: refuseOn("orders", errDown, records[0])}, &fakeAcker{}
	d := newTestDeliverer(t, 2, txp, acker, nil)
	d.core.Retry.Unavailable = func(err error) bool { return errors.Is(err, errDown) }
	_, err := d.Deliver(context.Background(), 0, allLeases(), records)
	if err == nil || !strings.Contains(err.Error(), "no attempt counted") || !strings.Contains(err.Error(), errDown.Error()) {
		t.Fatalf("Deliver returned %v, want the outage's error", err)
	}
	if got := seqs(acker.acked, recordSeq); !slices.Equal(got, []int64{2}) {
		t.Fatalf("acknowledged %v, want [2]", got)
	}
	if len(acker.settled) != 0 {
		t.Fatalf("settled %+v, want none: an outage spends no attempt", acker.settled)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(d.core.Metrics.Unavailable)
	families, err := reg.Gather()
	if err != nil || len(families) != 1 || len(families[0].GetMetric()) != 1 || families[0].GetMetric()[0].GetCounter().GetValue() != 1 {
		t.Fatalf("unavailable_total %v (%v), want one series at 1", families, err)
	}
}
