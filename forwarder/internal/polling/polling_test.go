package polling

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// The polling source with a fake store (relay.Claimer) and a fake deliverer: no database.

// never is a poll interval no test waits out: a worker that waits it instead of claiming again
// at once, or instead of waking, fails the test at its guard.
const never = time.Hour

// guard bounds a test's wait for a delivery that comes at once when the source works.
const guard = 20 * time.Second

// fakeStore serves every worker its leases and the claims queued for it, and records the claims.
type fakeStore struct {
	mu sync.Mutex
	// leases of each worker; leaseErr fails LiveLeases.
	leases   map[int][]relay.Lease
	leaseErr error
	// claims are the results of the successive Claim calls of a partition set's first partition;
	// claimErr fails Claim.
	claims   map[int][][]relay.Record
	claimErr error
	// claimed records each Claim call; leaseReads each LiveLeases call (the worker).
	claimed    []claimCall
	leaseReads []int
	// onClaim, when set, is told of each Claim call.
	onClaim chan int
	// released records each ReleaseDue call (partitions, limit); releaseErr fails it.
	released   []claimCall
	releaseErr error
	// nextDue is what NextDue reports (0: nothing scheduled).
	nextDue time.Duration
}

type claimCall struct {
	partitions []int
	limit      int
	maxBytes   int64
}

func (s *fakeStore) LiveLeases(_ context.Context, _ relay.Querier, owner string, worker, workers int) ([]relay.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaseReads = append(s.leaseReads, worker)
	if owner != "relay-1" || workers != len(s.leases) && s.leases != nil {
		return nil, errors.New("unexpected owner or worker count")
	}
	return slices.Clone(s.leases[worker]), s.leaseErr
}

func (s *fakeStore) ReleaseDue(_ context.Context, _ *sql.DB, partitions []int, limit int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = append(s.released, claimCall{partitions: slices.Clone(partitions), limit: limit})
	return s.releaseErr
}

func (s *fakeStore) NextDue(context.Context, relay.Querier, []int, time.Duration) (time.Duration, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextDue, s.nextDue != 0, nil
}

func (s *fakeStore) Claim(_ context.Context, _ relay.Querier, partitions []int, limit int, maxBytes int64) ([]relay.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claimed = append(s.claimed, claimCall{slices.Clone(partitions), limit, maxBytes})
	if s.onClaim != nil {
		s.onClaim <- len(s.claimed)
	}
	if s.claimErr != nil {
		return nil, s.claimErr
	}
	queue := s.claims[partitions[0]]
	if len(queue) == 0 {
		return nil, nil
	}
	s.claims[partitions[0]] = queue[1:]
	return queue[0], nil
}

// fakeDeliverer readies the leases ready allows, records the deliveries, and is the source's
// Shaper too: it trims a claim to its first trim records (all when 0).
type fakeDeliverer struct {
	mu    sync.Mutex
	ready func(leases []relay.Lease) []relay.Lease
	trim  int
	// limit and maxBytes are ClaimLimits' answer.
	limit    int
	maxBytes int64
	err      error
	// readied records what Ready was handed; delivered each delivery.
	readied   [][]relay.Lease
	delivered []delivery
	// busy records the partitions inflight has in flight during each delivery (inflight set
	// by a test that calls relayBatch alone: Inflight's maps are not read under its lock).
	inflight *relay.Inflight
	busy     [][]int
	// onDeliver, when set, is told of each delivery.
	onDeliver chan delivery
}

type delivery struct {
	worker  int
	leases  []relay.Lease
	records []relay.Record
}

func (d *fakeDeliverer) Start(context.Context) error { return nil }

func (d *fakeDeliverer) Ready(_ context.Context, _ int, leases []relay.Lease) ([]relay.Lease, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.readied = append(d.readied, slices.Clone(leases))
	if d.ready == nil {
		return leases, nil
	}
	return d.ready(leases), nil
}

func (d *fakeDeliverer) ClaimLimits([]relay.Lease) (int, int64) { return d.limit, d.maxBytes }

func (d *fakeDeliverer) TrimClaim(records []relay.Record) []relay.Record {
	if d.trim == 0 {
		return records
	}
	return records[:min(d.trim, len(records))]
}

func (d *fakeDeliverer) Deliver(_ context.Context, worker int, leases []relay.Lease, records []relay.Record) (relay.Outcome, error) {
	d.mu.Lock()
	dl := delivery{worker, slices.Clone(leases), slices.Clone(records)}
	d.delivered = append(d.delivered, dl)
	if d.inflight != nil {
		var busy []int
		for p := range outbox.Partitions {
			if d.inflight.Busy[p] > 0 {
				busy = append(busy, p)
			}
		}
		d.busy = append(d.busy, busy)
	}
	d.mu.Unlock()
	if d.onDeliver != nil {
		d.onDeliver <- dl
	}
	if d.err != nil {
		return relay.Outcome{}, d.err
	}
	return relay.Outcome{Acked: records}, nil
}

func (d *fakeDeliverer) Stop()           {}
func (d *fakeDeliverer) LogAttrs() []any { return nil }

// newSource returns a polling source of workers workers over store, handing claims to d.
func newSource(t *testing.T, workers, batchSize int, store *fakeStore, d *fakeDeliverer, cfg Config) *Source {
	t.Helper()
	m, err := relay.NewMetrics(nil, "events")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	core := relay.Core{RelayID: "relay-1", Workers: workers, BatchSize: batchSize, MaxBatchBytes: 1 << 20,
		Inflight: relay.NewInflight(workers), Metrics: m, Log: log, Progress: relay.NewProgress(m, log, time.Minute)}
	if cfg.Claims == nil {
		cfg.Claims = d
	}
	s := New(core, d, cfg)
	s.store = store
	return s
}

func leases(partitions ...int) []relay.Lease {
	out := make([]relay.Lease, len(partitions))
	for i, p := range partitions {
		out[i] = relay.Lease{Partition: p, Epoch: int64(10 + p)}
	}
	return out
}

func records(partition int, seqs ...int64) []relay.Record {
	out := make([]relay.Record, len(seqs))
	for i, seq := range seqs {
		out[i] = relay.Record{Seq: seq, Partition: partition, Event: outbox.Event{Topic: "orders"}}
	}
	return out
}

func seqs(rs []relay.Record) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.Seq
	}
	return out
}

func partitions(ls []relay.Lease) []int {
	out := make([]int, len(ls))
	for i, l := range ls {
		out[i] = l.Partition
	}
	return out
}

// TestBatchClaimsTheReadyLeasesAndDeliversTheTrimmedClaim: a worker claims from the partitions
// the deliverer readied, within the deliverer's limits, hands it the trimmed claim under all
// the worker's leases, holds those partitions in flight meanwhile, and counts what it delivered.
func TestBatchClaimsTheReadyLeasesAndDeliversTheTrimmedClaim(t *testing.T) {
	store := &fakeStore{leases: map[int][]relay.Lease{0: leases(0, 2), 1: leases(1, 3, 5)},
		claims: map[int][][]relay.Record{1: {slices.Concat(records(1, 7, 9), records(5, 8))}}}
	d := &fakeDeliverer{limit: 7, maxBytes: 99, trim: 2, ready: func(ls []relay.Lease) []relay.Lease {
		return slices.DeleteFunc(slices.Clone(ls), func(l relay.Lease) bool { return l.Partition == 3 })
	}}
	s := newSource(t, 2, 10, store, d, Config{})
	d.inflight = s.core.Inflight
	n, err := s.relayBatch(t.Context(), 1)
	if err != nil || n != 2 {
		t.Fatalf("relayBatch = %d, %v; want the 2 records of the trimmed claim", n, err)
	}
	if len(store.claimed) != 1 || !slices.Equal(store.claimed[0].partitions, []int{1, 5}) ||
		store.claimed[0].limit != 7 || store.claimed[0].maxBytes != 99 {
		t.Fatalf("claims %+v, want one of partitions [1 5] (the ready ones) within the limits 7 rows, 99 bytes", store.claimed)
	}
	if len(d.delivered) != 1 {
		t.Fatalf("%d deliveries, want 1", len(d.delivered))
	}
	got := d.delivered[0]
	if got.worker != 1 || !slices.Equal(got.leases, leases(1, 3, 5)) || !slices.Equal(seqs(got.records), []int64{7, 9}) {
		t.Fatalf("delivered worker %d, leases %v, seqs %v; want worker 1, all its leases [1 3 5], seqs [7 9]",
			got.worker, got.leases, seqs(got.records))
	}
	if !slices.Equal(d.busy[0], []int{1, 3, 5}) {
		t.Fatalf("in flight during the delivery: %v, want the worker's partitions [1 3 5]", d.busy[0])
	}
	if len(s.core.Inflight.Busy) != 0 {
		t.Fatalf("in flight after the batch: %v, want none", s.core.Inflight.Busy)
	}
}

// TestBatchReleasesDueScheduledEventsBeforeTheClaim: each batch first releases the due scheduled
// events of the claimed partitions, up to the claim's row limit; a release that fails (a table
// not migrated yet) is warned about once, not at every batch, and the claim still runs.
func TestBatchReleasesDueScheduledEventsBeforeTheClaim(t *testing.T) {
	store := &fakeStore{leases: map[int][]relay.Lease{0: leases(0, 2)}, releaseErr: errors.New("no column deliver_at"),
		claims: map[int][][]relay.Record{0: {records(0, 1), records(0, 2)}}}
	d := &fakeDeliverer{limit: 7, maxBytes: 99}
	s := newSource(t, 1, 10, store, d, Config{})
	var logs strings.Builder
	s.core.Log = slog.New(slog.NewTextHandler(&logs, nil))
	for range 2 {
		if n, err := s.relayBatch(t.Context(), 0); err != nil || n != 1 {
			t.Fatalf("relayBatch = %d, %v; want the claimed record despite the failed release", n, err)
		}
	}
	if len(store.released) != 2 || !slices.Equal(store.released[0].partitions, []int{0, 2}) || store.released[0].limit != 7 {
		t.Fatalf("releases %+v, want one per batch, of partitions [0 2] up to 7 rows", store.released)
	}
	if n := strings.Count(logs.String(), "releasing due scheduled events failed"); n != 1 {
		t.Fatalf("%d warnings about the failed release in two batches, want 1:\n%s", n, logs.String())
	}
}

// TestBatchSkipsDrainingPartitions: a partition being released (draining) is neither readied
// nor claimed.
func TestBatchSkipsDrainingPartitions(t *testing.T) {
	store := &fakeStore{leases: map[int][]relay.Lease{0: leases(0, 1, 2)},
		claims: map[int][][]relay.Record{0: {records(0, 1)}}}
	d := &fakeDeliverer{limit: 10}
	s := newSource(t, 1, 10, store, d, Config{})
	s.core.Inflight.Rebalance([]int{1})
	if _, err := s.relayBatch(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(partitions(d.readied[0]), []int{0, 2}) || !slices.Equal(store.claimed[0].partitions, []int{0, 2}) {
		t.Fatalf("readied %v and claimed %v, want [0 2] both: partition 1 drains", d.readied[0], store.claimed[0].partitions)
	}
}

// TestBatchClaimsNothingUnready: with no lease, or no lease ready, nothing is claimed or
// delivered; after Run's context ended, not even the leases are read.
func TestBatchClaimsNothingUnready(t *testing.T) {
	for _, c := range []struct {
		name   string
		leases []relay.Lease
		ready  func([]relay.Lease) []relay.Lease
		stop   bool
		reads  int
	}{
		{"no lease", nil, nil, false, 1},
		{"none ready", leases(0), func([]relay.Lease) []relay.Lease { return nil }, false, 1},
		{"stopped", leases(0), nil, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := &fakeStore{leases: map[int][]relay.Lease{0: c.leases}, claims: map[int][][]relay.Record{0: {records(0, 1)}}}
			d := &fakeDeliverer{limit: 10, ready: c.ready}
			s := newSource(t, 1, 10, store, d, Config{})
			ctx, cancel := context.WithCancel(t.Context())
			if c.stop {
				cancel()
			}
			defer cancel()
			n, err := s.relayBatch(ctx, 0)
			if n != 0 || err != nil || len(store.claimed) != 0 || len(d.delivered) != 0 || len(store.leaseReads) != c.reads {
				t.Fatalf("relayBatch = %d, %v with %d claims, %d deliveries, %d lease reads; want nothing claimed, %d reads",
					n, err, len(store.claimed), len(d.delivered), len(store.leaseReads), c.reads)
			}
			if len(s.core.Inflight.Busy) != 0 || len(s.core.Inflight.Reading) != 0 {
				t.Fatalf("in flight after the batch: %v, reading %v", s.core.Inflight.Busy, s.core.Inflight.Reading)
			}
		})
	}
}

// TestBatchErrorsAreReturned: a failed lease read or claim delivers nothing; a failed delivery
// is returned with the number of rows claimed. Nothing stays in flight.
func TestBatchErrorsAreReturned(t *testing.T) {
	broken := errors.New("broken")
	for _, c := range []struct {
		name        string
		store       *fakeStore
		d           *fakeDeliverer
		n, delivers int
	}{
		{"lease read", &fakeStore{leases: map[int][]relay.Lease{0: leases(0)}, leaseErr: broken}, &fakeDeliverer{}, 0, 0},
		{"claim", &fakeStore{leases: map[int][]relay.Lease{0: leases(0)}, claimErr: broken}, &fakeDeliverer{}, 0, 0},
		{"delivery", &fakeStore{leases: map[int][]relay.Lease{0: leases(0)}, claims: map[int][][]relay.Record{0: {records(0, 1, 2)}}},
			&fakeDeliverer{err: broken}, 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSource(t, 1, 10, c.store, c.d, Config{})
			n, err := s.relayBatch(t.Context(), 0)
			if !errors.Is(err, broken) || n != c.n || len(c.d.delivered) != c.delivers {
				t.Fatalf("relayBatch = %d, %v with %d deliveries; want %d, %v, %d", n, err, len(c.d.delivered), c.n, broken, c.delivers)
			}
			if len(s.core.Inflight.Busy) != 0 {
				t.Fatalf("in flight after the failed batch: %v", s.core.Inflight.Busy)
			}
		})
	}
}

// run starts s.Run and returns a stop that ends it and waits for it.
func run(t *testing.T, s *Source) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(guard):
			t.Fatal("Run did not return after its context ended")
		}
	}
}

// next returns the next delivery, failing the test if none comes within guard.
func next(t *testing.T, deliveries <-chan delivery, what string) delivery {
	t.Helper()
	select {
	case d := <-deliveries:
		return d
	case <-time.After(guard):
		t.Fatalf("no delivery: %s", what)
	}
	return delivery{}
}

// TestEachWorkerRelaysItsOwnShare: Run starts a worker per Config.Workers, each reading its own
// leases and delivering their rows.
func TestEachWorkerRelaysItsOwnShare(t *testing.T) {
	store := &fakeStore{leases: map[int][]relay.Lease{0: leases(0), 1: leases(1), 2: leases(2)},
		claims: map[int][][]relay.Record{0: {records(0, 10)}, 1: {records(1, 11)}, 2: {records(2, 12)}}}
	d := &fakeDeliverer{limit: 10, onDeliver: make(chan delivery, 3)}
	stop := run(t, newSource(t, 3, 10, store, d, Config{MinPollInterval: never, MaxPollInterval: never}))
	got := map[int]int64{}
	for range 3 {
		dl := next(t, d.onDeliver, "every worker has a record")
		got[dl.worker] = dl.records[0].Seq
	}
	stop()
	if got[0] != 10 || got[1] != 11 || got[2] != 12 {
		t.Fatalf("delivered by worker: %v, want worker w the record of partition w", got)
	}
}

// TestFullBatchIsFollowedByAnotherClaimAtOnce: after a full batch a worker claims again without
// waiting its poll interval.
func TestFullBatchIsFollowedByAnotherClaimAtOnce(t *testing.T) {
	store := &fakeStore{leases: map[int][]relay.Lease{0: leases(0)},
		claims: map[int][][]relay.Record{0: {records(0, 1, 2), records(0, 3)}}}
	d := &fakeDeliverer{limit: 2, onDeliver: make(chan delivery, 2)}
	stop := run(t, newSource(t, 1, 2, store, d, Config{MinPollInterval: never, MaxPollInterval: never}))
	defer stop()
	next(t, d.onDeliver, "the full batch")
	if dl := next(t, d.onDeliver, "the claim after a full batch (did the worker wait its poll interval?)"); dl.records[0].Seq != 3 {
		t.Fatalf("second delivery %v, want seq 3", seqs(dl.records))
	}
}

// TestIdleWorkerWakes: an idle worker backing off claims again at once when the database
// notifies it (Wakeups) or the lease keeper took partitions (LeasesTaken).
func TestIdleWorkerWakes(t *testing.T) {
	for _, name := range []string{"Wakeups", "LeasesTaken"} {
		t.Run(name, func(t *testing.T) {
			wake := make(chan struct{}, 1)
			cfg := Config{MinPollInterval: never, MaxPollInterval: never}
			if name == "Wakeups" {
				cfg.Wakeups = wake
			} else {
				cfg.LeasesTaken = wake
			}
			// The first claim finds nothing, the second a record.
			store := &fakeStore{leases: map[int][]relay.Lease{0: leases(0)},
				claims: map[int][][]relay.Record{0: {nil, records(0, 1)}}, onClaim: make(chan int, 2)}
			d := &fakeDeliverer{limit: 10, onDeliver: make(chan delivery, 1)}
			stop := run(t, newSource(t, 1, 10, store, d, cfg))
			defer stop()
			select {
			case <-store.onClaim:
			case <-time.After(guard):
				t.Fatal("the worker never claimed")
			}
			wake <- struct{}{}
			if dl := next(t, d.onDeliver, "the idle worker was woken by "+name); dl.records[0].Seq != 1 {
				t.Fatalf("delivered %v, want seq 1", seqs(dl.records))
			}
		})
	}
}

// TestIdleWorkerPollsWhenAScheduledEventIsDue: an idle worker whose partitions hold a scheduled
// event sleeps until it is due, not its backoff: 30 empty claims, each followed by a backoff that
// doubles towards never, then a record; the worker reaches it because each sleep is cut to the
// 5 ms the store says the next scheduled event is away.
func TestIdleWorkerPollsWhenAScheduledEventIsDue(t *testing.T) {
	store := &fakeStore{leases: map[int][]relay.Lease{0: leases(0)}, nextDue: 5 * time.Millisecond,
		claims: map[int][][]relay.Record{0: append(make([][]relay.Record, 30), records(0, 1))}}
	d := &fakeDeliverer{limit: 10, onDeliver: make(chan delivery, 1)}
	stop := run(t, newSource(t, 1, 10, store, d, Config{MinPollInterval: time.Millisecond, MaxPollInterval: never}))
	defer stop()
	if dl := next(t, d.onDeliver, "the worker polled when the scheduled event was due"); dl.records[0].Seq != 1 {
		t.Fatalf("delivered %v, want seq 1", seqs(dl.records))
	}
}

// TestBatchesClaimABatchAndTakeItWhole: at-least-once's shape claims up to its bounds whatever
// the leases and delivers the claim whole.
func TestBatchesClaimABatchAndTakeItWhole(t *testing.T) {
	b := Batches{Rows: 10, Bytes: 1 << 20}
	if rows, bytes := b.ClaimLimits(leases(0, 1, 2)); rows != 10 || bytes != 1<<20 {
		t.Fatalf("ClaimLimits = %d, %d; want 10, %d", rows, bytes, 1<<20)
	}
	claim := slices.Concat(records(0, 1, 2), records(1, 3))
	if got := b.TrimClaim(claim); !slices.Equal(seqs(got), []int64{1, 2, 3}) {
		t.Fatalf("TrimClaim = %v, want the whole claim", seqs(got))
	}
}
