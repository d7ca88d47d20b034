// Package forwarder is outboxkit's relay: it claims committed events from the outbox table in
// batches, publishes them through any Watermill message.Publisher, and deletes (or marks) each row
// only after the broker acknowledged it. Failing events are retried with exponential backoff and
// jitter and finally dead-lettered; a failing event holds back only the later events of its own
// key. Several forwarders share the work through key-hash partition leases without breaking
// per-key order. See docs/forwarder.md for the design.
package forwarder

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/outboxkit/outboxkit/outbox"
)

// Metadata keys the forwarder adds to dead-lettered messages, beside Watermill's poison-queue
// keys (middleware.ReasonForPoisonedKey, middleware.PoisonedTopicKey).
const (
	MetadataAttempts       = "outbox_attempts"
	MetadataPayloadDropped = "outbox_payload_dropped_bytes"
)

// Forwarder relays events from one outbox table to a publisher. Create it with [New] and run it
// with [Forwarder.Run].
type Forwarder struct {
	cfg     Config
	store   *store
	metrics *metrics
	log     *slog.Logger
}

// New validates config and returns a Forwarder. It touches neither the database nor the broker.
func New(config Config) (*Forwarder, error) {
	config.setDefaults()
	if err := config.Validate(); err != nil {
		return nil, err
	}
	table, err := outbox.NewTable(config.Dialect, config.Table)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(config.Metrics, table.Events())
	if err != nil {
		return nil, fmt.Errorf("forwarder: %w", err)
	}
	return &Forwarder{
		cfg:     config,
		store:   &store{table: table, dialect: config.Dialect, group: config.LeaseGroup, tenants: config.Tenants},
		metrics: m,
		log:     config.Logger.With("component", "outboxkit.forwarder", "relay", config.RelayID, "table", table.Events()),
	}, nil
}

// startAttempts bounds how often Run retries reaching the database before giving up.
const startAttempts = 5

// Run relays events until ctx is cancelled, then finishes the in-flight batches, releases its
// leases and returns nil. It returns an error if the database cannot be reached at start
// (after a few bounded retries, each logged).
func (f *Forwarder) Run(ctx context.Context) error {
	if err := f.start(ctx); err != nil {
		return err
	}
	f.log.Info("forwarder started", "workers", f.cfg.Workers, "lease_group", f.cfg.LeaseGroup)

	var wg sync.WaitGroup
	loops := []func(context.Context){f.heartbeatLoop, f.statsLoop}
	if f.cfg.Retention > 0 {
		loops = append(loops, f.pruneLoop)
	}
	wakes := make([]chan struct{}, f.cfg.Workers)
	for i := range wakes {
		wakes[i] = make(chan struct{}, 1)
	}
	if f.cfg.Wakeups != nil {
		loops = append(loops, func(ctx context.Context) { fanOut(ctx, f.cfg.Wakeups, wakes) })
	}
	for _, loop := range loops {
		wg.Go(func() { loop(ctx) })
	}
	for i := range f.cfg.Workers {
		wg.Go(func() { f.workerLoop(ctx, i, wakes[i]) })
	}
	wg.Wait()

	releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := f.store.releaseAll(releaseCtx, f.cfg.DB, f.cfg.RelayID); err != nil {
		f.log.Warn("could not release leases on shutdown; they expire on their own", "error", err)
	}
	f.log.Info("forwarder stopped")
	return nil
}

// start creates the group's lease rows and takes a first share of partitions, retrying a
// database that is not reachable yet a bounded number of times.
func (f *Forwarder) start(ctx context.Context) error {
	var err error
	wait := 500 * time.Millisecond
	for attempt := 1; attempt <= startAttempts; attempt++ {
		if err = f.store.ensureLeaseRows(ctx, f.cfg.DB); err == nil {
			var owned int
			if owned, err = f.store.heartbeat(ctx, f.cfg.DB, f.cfg.RelayID, f.cfg.LeaseTTL); err == nil {
				f.metrics.ownedPartitions.Set(float64(owned))
				return nil
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("forwarder: start: %w", ctx.Err())
		}
		f.log.Warn("database not ready, retrying", "attempt", attempt, "of", startAttempts, "error", err)
		if attempt < startAttempts && !sleep(ctx, wait) {
			return fmt.Errorf("forwarder: start: %w", ctx.Err())
		}
		wait *= 2
	}
	return fmt.Errorf("forwarder: start on table %s failed after %d attempts (did you run outbox.Migrate?): %w",
		f.store.table, startAttempts, err)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func fanOut(ctx context.Context, in <-chan struct{}, outs []chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-in:
			if !ok {
				return
			}
			for _, out := range outs {
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}
}

func (f *Forwarder) heartbeatLoop(ctx context.Context) {
	ticker := time.NewTicker(f.cfg.HeartbeatInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		owned, err := f.store.heartbeat(ctx, f.cfg.DB, f.cfg.RelayID, f.cfg.LeaseTTL)
		if err != nil {
			if ctx.Err() == nil {
				f.log.Warn("lease heartbeat failed", "error", err)
			}
			continue
		}
		f.metrics.ownedPartitions.Set(float64(owned))
	}
}

func (f *Forwarder) statsLoop(ctx context.Context) {
	for {
		stats, err := f.store.stats(ctx, f.cfg.DB)
		if err != nil && ctx.Err() == nil {
			f.log.Warn("reading outbox stats failed", "error", err)
		}
		f.metrics.pending.Reset()
		f.metrics.oldestAge.Reset()
		f.metrics.dead.Reset()
		for _, st := range stats {
			f.metrics.pending.WithLabelValues(st.tenant).Set(float64(st.pending))
			f.metrics.dead.WithLabelValues(st.tenant).Set(float64(st.dead))
			if !st.oldest.IsZero() {
				f.metrics.oldestAge.WithLabelValues(st.tenant).Set(time.Since(st.oldest).Seconds())
			}
		}
		if !sleep(ctx, f.cfg.StatsInterval) {
			return
		}
	}
}

// pruneBatch bounds each retention DELETE so pruning never holds long locks.
const pruneBatch = 1000

func (f *Forwarder) pruneLoop(ctx context.Context) {
	for {
		cutoff := time.Now().Add(-f.cfg.Retention)
		for {
			n, err := f.store.prune(ctx, f.cfg.DB, cutoff, pruneBatch)
			if err != nil {
				if ctx.Err() == nil {
					f.log.Warn("pruning published rows failed", "error", err)
				}
				break
			}
			if n < pruneBatch {
				break
			}
		}
		if !sleep(ctx, f.cfg.PruneInterval) {
			return
		}
	}
}

// workerLoop claims and relays batches, polling adaptively: at once after a full batch;
// MinPollInterval after a partial one, ignoring wake-ups meanwhile so that a steady trickle of
// commits is relayed in batches rather than one claim per commit; and, while idle, backing off
// to MaxPollInterval unless a wake-up comes first.
func (f *Forwarder) workerLoop(ctx context.Context, worker int, wake <-chan struct{}) {
	interval := f.cfg.MinPollInterval
	for ctx.Err() == nil {
		n, err := f.relayBatch(ctx, worker)
		wakeable := false
		switch {
		case err != nil:
			if ctx.Err() == nil {
				f.log.Warn("relaying a batch failed; its rows stay pending", "worker", worker, "error", err)
			}
			interval = min(max(interval*2, 100*time.Millisecond), f.cfg.MaxPollInterval)
		case n >= f.cfg.BatchSize:
			interval = f.cfg.MinPollInterval
			continue
		case n > 0:
			interval = f.cfg.MinPollInterval
		default:
			interval = min(interval*2, f.cfg.MaxPollInterval)
			wakeable = true
		}
		timer := time.NewTimer(interval)
		if wakeable {
			select {
			case <-ctx.Done():
			case <-wake:
			case <-timer.C:
			}
		} else {
			select {
			case <-ctx.Done():
			case <-timer.C:
			}
		}
		timer.Stop()
	}
}

// batchTimeout bounds one batch, including the broker's acknowledgements; a batch that has begun
// is finished even after Run's context is cancelled, so shutdown leaves nothing half done.
const batchTimeout = 2 * time.Minute

// relayBatch runs one claim-publish-ack cycle for the worker's partitions and returns the number
// of rows claimed.
func (f *Forwarder) relayBatch(ctx context.Context, worker int) (int, error) {
	if ctx.Err() != nil {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	defer cancel()
	db := f.cfg.DB
	// On SQLite a write transaction held open during the publish would block the application's
	// writers, so the claim reads outside it and only the acks are written in one.
	holdLeases := f.cfg.Dialect != outbox.SQLite
	var (
		tx     *sql.Tx
		reader querier = db
		err    error
	)
	if holdLeases {
		if tx, err = db.BeginTx(ctx, nil); err != nil {
			return 0, fmt.Errorf("begin batch: %w", err)
		}
		defer func() { _ = tx.Rollback() }()
		reader = tx
	}
	partitions, err := f.store.lockOwnedPartitions(ctx, reader, f.cfg.RelayID, worker, f.cfg.Workers)
	if err != nil || len(partitions) == 0 {
		return 0, err
	}
	records, err := f.store.claim(ctx, reader, partitions, f.cfg.BatchSize)
	if err != nil || len(records) == 0 {
		return 0, err
	}
	f.metrics.batchSize.Observe(float64(len(records)))

	started := time.Now()
	acked, failed := f.publish(records)
	f.metrics.publishSeconds.Observe(time.Since(started).Seconds())

	if !holdLeases {
		if tx, err = db.BeginTx(ctx, nil); err != nil {
			return len(records), fmt.Errorf("begin ack: %w", err)
		}
		defer func() { _ = tx.Rollback() }()
	}
	ackedSeqs := make([]int64, len(acked))
	for i, r := range acked {
		ackedSeqs[i] = r.seq
	}
	if err := f.store.ack(ctx, tx, ackedSeqs, f.cfg.Retention > 0); err != nil {
		return len(records), err
	}
	for _, fl := range failed {
		if err := f.recordFailure(ctx, tx, fl.record, fl.err); err != nil {
			return len(records), err
		}
	}
	if err := tx.Commit(); err != nil {
		return len(records), fmt.Errorf("commit acks of %d rows: %w", len(acked), err)
	}
	f.observeAcked(acked)
	return len(records), nil
}

func (f *Forwarder) observeAcked(acked []record) {
	type label struct{ topic, tenant string }
	counts := map[label]int{}
	now := time.Now()
	for _, r := range acked {
		counts[label{r.event.Topic, r.event.TenantID}]++
		f.metrics.commitToAck.WithLabelValues(r.event.TenantID).Observe(now.Sub(r.event.CreatedAt).Seconds())
	}
	for l, n := range counts {
		f.metrics.relayed.WithLabelValues(l.topic, l.tenant).Add(float64(n))
	}
}

type failure struct {
	record record
	err    error
}

// publish sends the records in waves: wave k holds the k-th record of every key, so one Publish
// call never carries two events of the same key, and the next event of a key is sent only after
// the broker acknowledged the previous one. A producer that loses one message of a call but
// delivers the next (Sarama does, when a message is refused before sending or its retries run
// out during a broker outage) can therefore never put a key out of order. Within a wave there is
// one Publish call per topic, topics in parallel; if a call fails, its messages are published one
// by one (in parallel, they all have different keys) to isolate the failing ones. A key with a
// failure is left out of the later waves: its later records stay pending, parked behind it.
// publish returns the acknowledged records and the failed ones.
func (f *Forwarder) publish(records []record) (acked []record, failed []failure) {
	var waves [][]record
	position := make(map[int64]int, len(records))
	for _, r := range records {
		k := position[r.keyHash]
		position[r.keyHash]++
		if k == len(waves) {
			waves = append(waves, nil)
		}
		waves[k] = append(waves[k], r)
	}
	parked := map[int64]bool{}
	for _, wave := range waves {
		todo := wave[:0:0]
		for _, r := range wave {
			if !parked[r.keyHash] {
				todo = append(todo, r)
			}
		}
		a, fl := f.publishWave(todo)
		acked = append(acked, a...)
		for _, x := range fl {
			parked[x.record.keyHash] = true
			failed = append(failed, x)
		}
	}
	return acked, failed
}

// publishWave publishes records of distinct keys: one call per topic, topics in parallel.
func (f *Forwarder) publishWave(records []record) (acked []record, failed []failure) {
	var topics []string
	byTopic := map[string][]record{}
	for _, r := range records {
		if _, ok := byTopic[r.event.Topic]; !ok {
			topics = append(topics, r.event.Topic)
		}
		byTopic[r.event.Topic] = append(byTopic[r.event.Topic], r)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, topic := range topics {
		wg.Go(func() {
			a, fl := f.publishTopic(topic, byTopic[topic])
			mu.Lock()
			acked = append(acked, a...)
			failed = append(failed, fl...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return acked, failed
}

// isolateParallelism bounds the concurrent one-message publishes that isolate a failure.
const isolateParallelism = 32

// publishTopic publishes records of distinct keys to one topic in one call, or, if that call
// fails, one by one to find the failing ones.
func (f *Forwarder) publishTopic(topic string, records []record) (acked []record, failed []failure) {
	msgs := make([]*message.Message, len(records))
	for i, r := range records {
		msgs[i] = r.event.ToMessage()
	}
	err := f.cfg.Publisher.Publish(topic, msgs...)
	if err == nil {
		return records, nil
	}
	if len(records) == 1 {
		return nil, []failure{{records[0], err}}
	}
	f.log.Debug("batch publish failed; publishing its events one by one to isolate the failing ones",
		"topic", topic, "events", len(records), "error", err)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, isolateParallelism)
	for i := range records {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := f.cfg.Publisher.Publish(topic, msgs[i])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, failure{records[i], err})
				return
			}
			acked = append(acked, records[i])
		})
	}
	wg.Wait()
	return f.confirmPermanent(topic, acked, failed)
}

// confirmPermanent publishes each permanently failed message once more, alone and one at a time,
// before it is dead-lettered: a producer may have batched concurrent single-message calls into
// one request that the broker refused whole (for example, too large because of one message),
// failing innocent messages with it.
func (f *Forwarder) confirmPermanent(topic string, acked []record, failed []failure) ([]record, []failure) {
	confirmed := failed[:0:0]
	for _, fl := range failed {
		if f.cfg.IsRetriable(fl.err) {
			confirmed = append(confirmed, fl)
			continue
		}
		if err := f.cfg.Publisher.Publish(topic, fl.record.event.ToMessage()); err != nil {
			confirmed = append(confirmed, failure{fl.record, err})
			continue
		}
		acked = append(acked, fl.record)
	}
	return acked, confirmed
}

// recordFailure counts a failed attempt: it schedules a retry with backoff, or, after the last
// attempt or on a permanent error, dead-letters the event. A dead letter that cannot be published
// is retried like any failure: an event is never marked dead before the poison topic has it.
func (f *Forwarder) recordFailure(ctx context.Context, q querier, r record, publishErr error) error {
	attempts := r.attempts + 1
	f.metrics.failed.WithLabelValues(r.event.Topic, r.event.TenantID).Inc()
	reason := publishErr.Error()
	retriable := f.cfg.IsRetriable(publishErr)
	if !retriable || attempts >= f.cfg.MaxAttempts {
		dlqErr := f.deadLetter(r, reason, attempts)
		if dlqErr == nil {
			f.metrics.deadLettered.WithLabelValues(r.event.Topic, r.event.TenantID).Inc()
			f.log.Warn("event dead-lettered", "event_id", r.event.ID, "topic", r.event.Topic,
				"aggregate_id", r.event.AggregateID, "attempts", attempts, "retriable", retriable, "reason", reason)
			return f.store.fail(ctx, q, r.seq, attempts, time.Now(), true, reason)
		}
		reason = fmt.Sprintf("%s (dead-lettering to %s failed: %v)", reason, f.cfg.DeadLetterTopic, dlqErr)
	}
	next := time.Now().Add(f.backoff(attempts))
	f.log.Info("publish failed, will retry", "event_id", r.event.ID, "topic", r.event.Topic,
		"aggregate_id", r.event.AggregateID, "attempts", attempts, "next_attempt", next, "error", reason)
	return f.store.fail(ctx, q, r.seq, attempts, next, false, reason)
}

// deadLetter publishes the event to the dead-letter topic with Watermill's poison-queue headers.
// If the broker refuses it permanently (for example, too large), it is sent without its payload,
// which stays in the outbox row for a replay.
func (f *Forwarder) deadLetter(r record, reason string, attempts int) error {
	msg := r.event.ToMessage()
	msg.Metadata.Set(middleware.ReasonForPoisonedKey, reason)
	msg.Metadata.Set(middleware.PoisonedTopicKey, r.event.Topic)
	msg.Metadata.Set(MetadataAttempts, strconv.Itoa(attempts))
	err := f.cfg.Publisher.Publish(f.cfg.DeadLetterTopic, msg)
	if err == nil || f.cfg.IsRetriable(err) {
		return err
	}
	slim := msg.Copy()
	slim.Payload = nil
	slim.Metadata.Set(MetadataPayloadDropped, strconv.Itoa(len(msg.Payload)))
	if err2 := f.cfg.Publisher.Publish(f.cfg.DeadLetterTopic, slim); err2 != nil {
		return errors.Join(err, err2)
	}
	return nil
}

// backoff is InitialBackoff * BackoffMultiplier^(attempts-1), capped at MaxBackoff, spread by
// ±BackoffJitter so retries of many events do not arrive together.
func (f *Forwarder) backoff(attempts int) time.Duration {
	d := float64(f.cfg.InitialBackoff) * math.Pow(f.cfg.BackoffMultiplier, float64(attempts-1))
	d = math.Min(d, float64(f.cfg.MaxBackoff))
	d *= 1 + f.cfg.BackoffJitter*(2*rand.Float64()-1)
	return time.Duration(d)
}
