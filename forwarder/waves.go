package forwarder

import (
	"context"
	"sync"
)

// publishWaves is the path for a plain message.Publisher, which reports one error per call. It
// sends the records in waves: wave k holds the k-th record of every key, so one Publish call
// never carries two events of the same key, and the next event of a key is sent only after the
// broker acknowledged the previous one. A producer that loses one message of a call but
// delivers the next can therefore never put a key out of order. Within a wave there is one
// Publish call per topic, topics in parallel; if a call fails, its messages are published one by
// one (in parallel, they all have different keys) to isolate the failing ones, since a plain
// publisher does not say which failed. A key with a failure is left out of the later waves: its
// later records stay pending, parked behind it.
func (f *Forwarder) publishWaves(ctx context.Context, records []record) (acked []record, failed []failure) {
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
		a, fl := eachTopic(todo, func(topic string, records []record) ([]record, []failure) {
			return f.publishTopic(ctx, topic, records)
		})
		acked = append(acked, a...)
		for _, x := range fl {
			parked[x.record.keyHash] = true
			failed = append(failed, x)
		}
	}
	return acked, failed
}

// isolateParallelism bounds the concurrent one-message publishes that isolate a failure.
const isolateParallelism = 32

// publishTopic publishes records of distinct keys to one topic in one call, or, if that call
// fails, one by one to find the failing ones.
func (f *Forwarder) publishTopic(ctx context.Context, topic string, records []record) (acked []record, failed []failure) {
	msgs := toMessages(ctx, records)
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
	return f.confirmPermanent(ctx, topic, acked, failed)
}

// confirmPermanent publishes each permanently failed message once more, alone and one at a time,
// before it is dead-lettered: a producer may have packed several messages into one request that
// the broker refused whole (for example, too large because of one message), failing innocent
// messages with it.
func (f *Forwarder) confirmPermanent(ctx context.Context, topic string, acked []record, failed []failure) ([]record, []failure) {
	confirmed := failed[:0:0]
	for _, fl := range failed {
		if f.cfg.IsRetriable(fl.err) {
			confirmed = append(confirmed, fl)
			continue
		}
		if err := f.publishAlone(ctx, topic, toMessages(ctx, []record{fl.record})[0]); err != nil {
			confirmed = append(confirmed, failure{fl.record, err})
			continue
		}
		acked = append(acked, fl.record)
	}
	return acked, confirmed
}
