// Package publishcall holds the bookkeeping of one PublishEach call (forwarder.OutcomePublisher)
// of a publisher that sends in waves (keyorder.Waves): every message's outcome, the broker's
// acknowledgements, and the keys stopped at their first failure. brokers/nats and
// brokers/rabbitmq build their PublishEach on it; the waves themselves are package keyorder's.
package publishcall

import (
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/keyorder"
)

// Call is the outcome of each message of one PublishEach call: Errs[i] its error, Acked[i]
// whether the broker acknowledged it.
type Call struct {
	Msgs  []*message.Message
	Errs  []error
	Acked []bool
	waves *keyorder.Plan[string]
}

// New returns the bookkeeping of a call publishing msgs, whose errors go to errs (of the same
// length). The key of a message is its metadata entry keyMetadata ("" for a nil message or
// none): the messages without a key are one key.
func New(msgs []*message.Message, errs []error, keyMetadata string) *Call {
	keys := make([]string, len(msgs))
	for i, msg := range msgs {
		if msg != nil {
			keys[i] = msg.Metadata.Get(keyMetadata)
		}
	}
	return &Call{Msgs: msgs, Errs: errs, Acked: make([]bool, len(msgs)), waves: keyorder.Waves(keys)}
}

// Waves sends the call's waves in order (keyorder.Plan.Run): send gets the messages of one wave
// whose key has no failure and reports false to stop the call; heldBack gets each message held
// back behind an earlier failure of its key.
func (c *Call) Waves(send func(wave []int) bool, heldBack func(i int)) { c.waves.Run(send, heldBack) }

// Key returns the key of Msgs[i].
func (c *Call) Key(i int) string { return c.waves.Key(i) }

// Fail records the failure of Msgs[i]: the later messages of its key are not to be sent.
func (c *Call) Fail(i int, err error) {
	c.Errs[i] = err
	c.waves.Stop(c.Key(i))
}

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
