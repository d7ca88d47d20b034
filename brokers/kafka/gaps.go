package kafka

import (
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Gaplessness per key after a produce call, and the size of a record batch.

// ReorderedLogMessage is the error-level log line of PublishEach when the broker acknowledged
// messages of a key after an earlier message of that key failed (see PublishEach). Its fields:
// topic, key, failed_uuid, reordered (how many), first_reordered_uuid.
const ReorderedLogMessage = "Kafka acknowledged messages after an earlier message of their key failed: " +
	"the key is out of order on the broker; they are reported as failed, to be sent again after it"

// reordering is a message (later) acknowledged after an earlier message of its key (first)
// failed with cause.
type reordering struct {
	first, later int
	cause        error
}

// closeGaps makes errs gapless per key, in place: after the first failure of a key, every later
// message of that key gets an error wrapping ErrEarlierMessageFailed (keeping an existing one).
// It returns the later messages that had been acknowledged, the reorderings, for the caller to
// log. msgs[i] == nil is skipped (its error stays as it is).
func closeGaps(msgs []*message.Message, keys []string, errs []error) []reordering {
	var reordered []reordering
	firstFailed := map[string]int{}
	for j, err := range errs {
		if msgs[j] == nil {
			continue
		}
		first, ok := firstFailed[keys[j]]
		if !ok {
			if err != nil {
				firstFailed[keys[j]] = j
			}
			continue
		}
		if errors.Is(err, ErrEarlierMessageFailed) {
			continue
		}
		if err == nil {
			reordered = append(reordered, reordering{first: first, later: j, cause: errs[first]})
		}
		errs[j] = earlierFailed(msgs[j], msgs[first], keys[j], errs[first])
	}
	return reordered
}

// earlierFailed is the error of msg, not sent (or to be sent again) because the earlier message
// first of the same key failed with cause. It wraps ErrEarlierMessageFailed, not cause: msg itself
// is fine, whatever cause says about first.
func earlierFailed(msg, first *message.Message, key string, cause error) error {
	return fmt.Errorf("%w: message %s of key %q, after message %s failed (%v)",
		ErrEarlierMessageFailed, msg.UUID, key, first.UUID, cause)
}

// recordBatchSlack covers what franz-go's size estimate may add to recordBatchSize: the uvarint
// length prefix of flexible produce requests (at most one byte more than the fixed one).
const recordBatchSlack = 16

// recordBatchOverhead is the size of a v2 record batch holding no record (franz-go's
// recordBatchOverhead: length prefix, base offset, batch length, leader epoch, magic, crc,
// attributes, last offset delta, two timestamps, producer id and epoch, base sequence, count).
const recordBatchOverhead = 4 + 8 + 4 + 4 + 1 + 4 + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4

// recordBatchSize is the size of a record batch holding r alone, computed as franz-go does
// before buffering r (sink.go, recordNumbersAt and tryBuffer; offset and timestamp deltas are 0
// for the first record of a batch), plus recordBatchSlack. franz-go refuses r with
// MESSAGE_TOO_LARGE when this exceeds ProducerBatchMaxBytes.
func recordBatchSize(r *kgo.Record) int {
	l := 1 + // attributes
		varintLen(0) + // timestamp delta
		varintLen(0) + // offset delta
		varintLen(int64(len(r.Key))) + len(r.Key) +
		varintLen(int64(len(r.Value))) + len(r.Value) +
		varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		l += varintLen(int64(len(h.Key))) + len(h.Key) + varintLen(int64(len(h.Value))) + len(h.Value)
	}
	return recordBatchOverhead + varintLen(int64(l)) + l + recordBatchSlack
}

// varintLen is the length of v as a zigzag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}
