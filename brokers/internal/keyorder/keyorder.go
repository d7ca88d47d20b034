// Package keyorder holds the per-key bookkeeping of a publisher that reports an outcome per
// message (forwarder.OutcomePublisher) and never has two messages of one key in flight: the
// messages of a call go out in waves (the k-th message of every key in wave k), and a key stops
// at its first failure. brokers/nats and brokers/rabbitmq build their PublishEach on it.
package keyorder

import "github.com/ThreeDotsLabs/watermill/message"

// Waves splits the indexes of msgs into waves: wave k holds the k-th message of every key, in
// the order of msgs. The key of a message is its metadata keyMetadata ("" for a nil message).
func Waves(msgs []*message.Message, keyMetadata string) [][]int {
	var out [][]int
	position := map[string]int{}
	for i, msg := range msgs {
		key := ""
		if msg != nil {
			key = msg.Metadata.Get(keyMetadata)
		}
		k := position[key]
		position[key]++
		if k == len(out) {
			out = append(out, nil)
		}
		out[k] = append(out[k], i)
	}
	return out
}

// Call is the outcome of each message of one PublishEach call: Errs[i] its error, Acked[i]
// whether the broker acknowledged it.
type Call struct {
	Msgs        []*message.Message
	Errs        []error
	Acked       []bool
	keyMetadata string
	failed      map[string]bool // keys with a failure
}

// NewCall returns the bookkeeping of a call publishing msgs, whose errors go to errs (of the
// same length).
func NewCall(msgs []*message.Message, errs []error, keyMetadata string) *Call {
	return &Call{Msgs: msgs, Errs: errs, Acked: make([]bool, len(msgs)), keyMetadata: keyMetadata, failed: map[string]bool{}}
}

// Key returns the key of Msgs[i] ("" for a nil message).
func (c *Call) Key(i int) string {
	if c.Msgs[i] == nil {
		return ""
	}
	return c.Msgs[i].Metadata.Get(c.keyMetadata)
}

// Fail records the failure of Msgs[i]: the later messages of its key are not to be sent.
func (c *Call) Fail(i int, err error) {
	c.Errs[i] = err
	c.failed[c.Key(i)] = true
}

// KeyFailed reports whether an earlier message of the key of Msgs[i] failed.
func (c *Call) KeyFailed(i int) bool { return c.failed[c.Key(i)] }

// UUIDOf returns the UUID of msg ("" for nil).
func UUIDOf(msg *message.Message) string {
	if msg == nil {
		return ""
	}
	return msg.UUID
}

// Fill sets every entry of errs to err.
func Fill(errs []error, err error) {
	for i := range errs {
		errs[i] = err
	}
}
