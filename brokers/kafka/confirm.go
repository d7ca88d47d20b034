package kafka

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Confirming a broker's refusal: a broker refuses a whole record batch for one bad record
// (MESSAGE_TOO_LARGE when message_max_bytes is above the topic's max.message.bytes,
// INVALID_RECORD), and franz-go then fails every later record of the partition with the same
// error, so a permanent error may belong to another message of the batch.

// confirmRefusedAlone gives each message of a key whose first failure is a permanent refusal by
// the broker its own outcome (confirmKeyAlone), key after key in the order of their first
// message.
func (p *Publisher) confirmRefusedAlone(ctx context.Context, topic string, msgs []*message.Message, records []*kgo.Record,
	keys []string, errs []error) {
	byKey := map[string][]int{}
	var order []string
	for i, msg := range msgs {
		if msg == nil {
			continue
		}
		if _, seen := byKey[keys[i]]; !seen {
			order = append(order, keys[i])
		}
		byKey[keys[i]] = append(byKey[keys[i]], i)
	}
	for _, key := range order {
		p.confirmKeyAlone(ctx, topic, msgs, records, errs, byKey[key])
	}
}

// confirmKeyAlone handles the messages idx of one key, in order. When the first failure among
// them was refused by the broker with a permanent error, it and every later message of the key
// are sent again, one at a time and alone (confirmAlone), until one fails alone: that failure is
// the message's own, and the rest of the key is held back behind it (ErrEarlierMessageFailed).
// Each message acknowledged now was innocent; since the key's earlier messages are acknowledged
// first, its order holds. A message the client refused before producing (no record) keeps its
// own error, and its key's later messages stay held back behind it.
func (p *Publisher) confirmKeyAlone(ctx context.Context, topic string, msgs []*message.Message, records []*kgo.Record,
	errs []error, idx []int) {
	start := -1
	for n, i := range idx {
		if errs[i] != nil {
			start = n
			break
		}
	}
	if start < 0 || records[idx[start]] == nil || Retriable(errs[idx[start]]) {
		return
	}
	for n := start; n < len(idx); n++ {
		i := idx[n]
		if records[i] == nil {
			return
		}
		if err := p.sendAgainAlone(ctx, topic, msgs[i]); err != nil {
			errs[i] = err
			key := msgs[i].Metadata.Get(p.config.KeyMetadata)
			for _, j := range idx[n+1:] {
				errs[j] = earlierFailed(msgs[j], msgs[i], key, err)
			}
			return
		}
		errs[i] = nil
	}
}

// sendAgainAlone produces msg again, as a fresh record (franz-go keeps state in a record it
// produced), alone, and returns its own error.
func (p *Publisher) sendAgainAlone(ctx context.Context, topic string, msg *message.Message) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kafka: message %s to topic %q not sent again alone after its batch was refused: %w", msg.UUID, topic, err)
	}
	rec, err := p.record(topic, msg)
	if err == nil {
		err = p.confirmAlone(ctx, rec)
	}
	if err != nil {
		return fmt.Errorf("kafka: message %s to topic %q, also when sent alone: %w", msg.UUID, topic, err)
	}
	return nil
}

// confirmAlone produces rec alone on the confirming client and returns its error. One at a
// time (confirmMu) and on a client of its own, created on first use: on the shared client, a
// record sent alone may still share a batch with a bad record of a concurrent call (two workers
// whose keys land on one partition) and be refused again with it.
func (p *Publisher) confirmAlone(ctx context.Context, rec *kgo.Record) error {
	p.confirmMu.Lock()
	defer p.confirmMu.Unlock()
	if p.confirmer == nil {
		c, err := kgo.NewClient(p.opts...)
		if err != nil {
			return fmt.Errorf("kafka: cannot create the client that confirms refused messages: %w", err)
		}
		p.confirmer = c
	}
	return p.confirmer.ProduceSync(ctx, rec).FirstErr()
}
