package forwarder

import (
	"testing"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// TestStreamSchedulerTakesBatchesWhileWorkersAreBusy: the delivering loop keeps taking the
// stream's full batches into the workers' next parts while every worker is busy, until one of
// them has a full part waiting, so that a drain goes out in parts of up to BatchSize rows and the
// reader keeps receiving meanwhile; while a worker is idle it takes any batch.
func TestStreamSchedulerTakesBatchesWhileWorkersAreBusy(t *testing.T) {
	rows := func(n int, bytes int64) []cdcPart {
		return []cdcPart{{batches: []uint64{0}, b: cdcBatch{records: make([]relay.Record, n), bytes: bytes}}}
	}
	for _, tc := range []struct {
		name    string
		busy    []bool
		waiting [][]cdcPart
		take    string
	}{
		{"all idle, nothing waiting", []bool{false, false}, [][]cdcPart{nil, nil}, "any"},
		{"one idle, a part below BatchSize waiting", []bool{true, false}, [][]cdcPart{rows(500, 500), nil}, "any"},
		{"all busy, nothing waiting", []bool{true, true}, [][]cdcPart{nil, nil}, "full"},
		{"all busy, parts below BatchSize waiting", []bool{true, true}, [][]cdcPart{rows(500, 500), rows(10, 10)}, "full"},
		{"all busy, one part of BatchSize rows waiting", []bool{true, true}, [][]cdcPart{rows(1000, 1000), nil}, "none"},
		{"all busy, one part of MaxBatchBytes waiting", []bool{true, true}, [][]cdcPart{nil, rows(3, 1<<20)}, "none"},
		{"one idle, a full part waiting for the busy one", []bool{true, false}, [][]cdcPart{rows(1000, 1000), nil}, "none"},
		{"all busy, two parts waiting", []bool{true, true}, [][]cdcPart{append(rows(1, 1), rows(1, 1)...), nil}, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full := make(chan cdcBatch)
			s := &streamScheduler{f: &Forwarder{cfg: Config{BatchSize: 1000, MaxBatchBytes: 1 << 20}}, full: full,
				queues: make([]chan cdcPart, len(tc.busy)), busy: tc.busy, waiting: tc.waiting}
			for _, b := range tc.busy {
				if b {
					s.inFlight++
				}
			}
			batches := make(chan cdcBatch)
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
	part := cdcPart{batches: []uint64{1}, b: cdcBatch{records: make([]relay.Record, 3)}}
	s := &streamScheduler{f: &Forwarder{cdc: &cdcState{}}, queues: []chan cdcPart{make(chan cdcPart, 1)},
		done: make(chan cdcDone, 1), busy: []bool{true}, inFlight: 1, waiting: [][]cdcPart{{part}}}
	s.done <- cdcDone{worker: 0, batches: []uint64{0}}
	drained := make(chan struct{})
	go func() { s.drain(); close(drained) }()
	select {
	case <-drained:
	case part := <-s.queues[0]: // started instead; the drain now waits for it
		t.Fatalf("the drain handed the worker its waiting part of %d rows", len(part.b.records))
	}
	if len(s.waiting[0]) != 1 || s.inFlight != 0 {
		t.Fatalf("after the drain: %d parts waiting, %d in flight; want 1 and 0", len(s.waiting[0]), s.inFlight)
	}
}
