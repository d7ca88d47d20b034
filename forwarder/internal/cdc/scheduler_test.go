package cdc

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// TestStreamSchedulerTakesBatchesWhileWorkersAreBusy: the delivering loop keeps taking the
// stream's full batches into the workers' next parts while every worker is busy, until one of
// them has a full part waiting, so that a drain goes out in parts of up to BatchSize rows and the
// reader keeps receiving meanwhile; while a worker is idle it takes any batch.
func TestStreamSchedulerTakesBatchesWhileWorkersAreBusy(t *testing.T) {
	rows := func(n int, bytes int64) []part {
		return []part{{batches: []uint64{0}, b: batch{records: make([]relay.Record, n), bytes: bytes}}}
	}
	for _, tc := range []struct {
		name    string
		busy    []bool
		waiting [][]part
		take    string
	}{
		{"all idle, nothing waiting", []bool{false, false}, [][]part{nil, nil}, "any"},
		{"one idle, a part below BatchSize waiting", []bool{true, false}, [][]part{rows(500, 500), nil}, "any"},
		{"all busy, nothing waiting", []bool{true, true}, [][]part{nil, nil}, "full"},
		{"all busy, parts below BatchSize waiting", []bool{true, true}, [][]part{rows(500, 500), rows(10, 10)}, "full"},
		{"all busy, one part of BatchSize rows waiting", []bool{true, true}, [][]part{rows(1000, 1000), nil}, "none"},
		{"all busy, one part of MaxBatchBytes waiting", []bool{true, true}, [][]part{nil, rows(3, 1<<20)}, "none"},
		{"one idle, a full part waiting for the busy one", []bool{true, false}, [][]part{rows(1000, 1000), nil}, "none"},
		{"all busy, two parts waiting", []bool{true, true}, [][]part{append(rows(1, 1), rows(1, 1)...), nil}, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full := make(chan batch)
			s := &streamScheduler{schedulerDeps: schedulerDeps{batchSize: 1000, maxBytes: 1 << 20}, full: full,
				queues: make([]chan part, len(tc.busy)), busy: tc.busy, waiting: tc.waiting}
			for _, b := range tc.busy {
				if b {
					s.inFlight++
				}
			}
			batches := make(chan batch)
			got := "none"
			switch s.intake(batches) {
			case batches:
				got = "any"
			case full:
				got = "full"
			}
			if got != tc.take {
				t.Fatalf("intake takes %s batch, want %s (busy %v, waiting parts %d and %d)",
					got, tc.take, tc.busy, len(tc.waiting[0]), len(tc.waiting[1]))
			}
		})
	}
}

// TestStreamSchedulerDrainStartsNoWaitingPart: when the session stops, the loop waits for the
// parts in flight and starts none of the parts still waiting (their batches are not confirmed;
// the stream replays them), so a stop does not publish the whole waiting backlog first.
func TestStreamSchedulerDrainStartsNoWaitingPart(t *testing.T) {
	waiting := part{batches: []uint64{1}, b: batch{records: make([]relay.Record, 3)}}
	s := &streamScheduler{schedulerDeps: schedulerDeps{activity: &activity{}}, queues: []chan part{make(chan part, 1)},
		done: make(chan partDone, 1), busy: []bool{true}, inFlight: 1, waiting: [][]part{{waiting}}}
	s.done <- partDone{worker: 0, batches: []uint64{0}}
	drained := make(chan struct{})
	go func() { s.drain(); close(drained) }()
	select {
	case <-drained:
	case p := <-s.queues[0]: // started instead; the drain now waits for it
		t.Fatalf("the drain handed the worker its waiting part of %d rows", len(p.b.records))
	}
	if len(s.waiting[0]) != 1 || s.inFlight != 0 {
		t.Fatalf("after the drain: %d parts waiting, %d in flight; want 1 and 0", len(s.waiting[0]), s.inFlight)
	}
}

// fakeWork is a scheduler's work whose parts each wait for the test to end them.
type fakeWork struct {
	started chan startedPart // each part as its worker starts it
	end     []chan error     // by worker: what the part returns
}

type startedPart struct {
	worker int
	seqs   []int64
}

func newFakeWork(workers int) *fakeWork {
	w := &fakeWork{started: make(chan startedPart, workers), end: make([]chan error, workers)}
	for i := range w.end {
		w.end[i] = make(chan error)
	}
	return w
}

func (w *fakeWork) work(_ context.Context, worker int, _ []relay.Lease, b batch) error {
	var seqs []int64
	for _, r := range b.records {
		seqs = append(seqs, r.Seq)
	}
	w.started <- startedPart{worker, seqs}
	return <-w.end[worker]
}

// next returns the next part a worker started (the test's goroutine is the scheduler's loop,
// so nothing is settled meanwhile).
func (w *fakeWork) next(t *testing.T) startedPart {
	t.Helper()
	select {
	case p := <-w.started:
		return p
	case <-time.After(time.Minute): // a bound against a hang
		t.Fatal("no worker started a part")
		return startedPart{}
	}
}

func testMetrics(t *testing.T) *metrics {
	t.Helper()
	v, err := newMetricVecs(nil, "events")
	if err != nil {
		t.Fatal(err)
	}
	return v.forSlot("slot")
}

// records returns one record per partition given, with seqs from seq on.
func records(seq int64, partitions ...int) []relay.Record {
	out := make([]relay.Record, len(partitions))
	for i, p := range partitions {
		out[i] = relay.Record{Seq: seq + int64(i), Partition: p}
	}
	return out
}

func streamBatchOf(confirm pgrepl.LSN, recs []relay.Record) batch {
	return batch{records: recs, xids: make([]uint32, len(recs)), confirm: confirm, walEnd: confirm}
}

// TestStreamSchedulerConfirmsInOrderOnceEveryPartIsDone drives the scheduler with a fake work
// and a fake reading of the leases (no database): a batch's rows are split among the workers by
// partition (a key always goes to one worker, in stream order), and the slot position moves to
// a batch's end only once its parts and those of every earlier batch are done, never past a
// part that failed.
func TestStreamSchedulerConfirmsInOrderOnceEveryPartIsDone(t *testing.T) {
	ctx := context.Background()
	fw := newFakeWork(2)
	leases := []relay.Lease{{Partition: 0}, {Partition: 1}}
	reader := &streamReader{full: make(chan batch)}
	s := startScheduler(ctx, reader, 2, schedulerDeps{batchSize: 100, maxBytes: 1 << 20, metrics: testMetrics(t),
		activity: &activity{}, work: fw.work,
		readLeases: func(context.Context) ([]relay.Lease, error) { return leases, nil }})
	defer s.stopWorkers()
	defer func() { // a part a failed check left in flight ends, so that the workers stop
		for _, end := range fw.end {
			close(end)
		}
	}()
	refresh := make(chan struct{}, 1)
	take := func(b batch) {
		t.Helper()
		if err := s.take(ctx, b, refresh); err != nil {
			t.Fatal(err)
		}
	}
	settle := func(worker int, err error) {
		t.Helper()
		fw.end[worker] <- err
		s.settle(<-s.done)
	}
	confirmed := func() pgrepl.LSN { return pgrepl.LSN(s.reader.confirmed.Load()) }

	take(streamBatchOf(100, records(1, 0, 1, 2))) // partitions 0 and 2 to worker 0, 1 to worker 1
	first := map[int][]int64{}
	for range 2 {
		p := fw.next(t)
		first[p.worker] = p.seqs
	}
	if !slices.Equal(first[0], []int64{1, 3}) || !slices.Equal(first[1], []int64{2}) {
		t.Fatalf("parts of the first batch: worker 0 %v, worker 1 %v; want [1 3] and [2]", first[0], first[1])
	}
	take(streamBatchOf(200, records(4, 1, 3))) // worker 1 only: it waits behind worker 1's part
	take(streamBatchOf(300, nil))              // an idle keepalive's position
	settle(1, nil)
	if p := fw.next(t); p.worker != 1 || !slices.Equal(p.seqs, []int64{4, 5}) {
		t.Fatalf("after its first part, worker %d started %v; want worker 1 with [4 5]", p.worker, p.seqs)
	}
	settle(1, nil)
	if got := confirmed(); got != 0 {
		t.Fatalf("confirmed %d while worker 0's part of the first batch is in flight, want 0", got)
	}
	settle(0, nil)
	if got := confirmed(); got != 300 {
		t.Fatalf("confirmed %d once every part was done, want 300 (the idle batch's position)", got)
	}

	take(streamBatchOf(400, records(6, 0)))
	fw.next(t)
	take(streamBatchOf(500, records(7, 1)))
	fw.next(t)
	settle(1, nil) // the later batch is done first: nothing moves
	settle(0, errors.New("publish failed"))
	if got := confirmed(); got != 300 {
		t.Fatalf("confirmed %d after the part of batch 400 failed, want 300: the stream restarts from there", got)
	}
	if s.firstErr == nil {
		t.Fatal("the scheduler did not keep the part's failure")
	}
}
