package rabbitmq_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/rabbitmq"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// serverLimit is the max_message_size of the RabbitMQ node of scripts/services.sh.
const serverLimit = 16 << 20

// A publisher whose MaxMessageSize (32 MiB) is above the server's (16 MiB): the server refuses
// a 17 MiB message by closing the channel. The message must fail permanently
// (ErrMessageTooLarge, from the size the server's reason names), its key's later message is held
// back retriably, and a later call refuses the same message before sending it, so that the call's
// other message is confirmed on a channel nothing closed.
func TestPublishEachAboveTheServersLimit(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxMessageSize = 2 * serverLimit
	pub := newPublisher(t, cfg)
	topic := testsupport.UniqueName("rmq_serverlimit")
	t.Cleanup(func() { deleteTopic(t, cfg.URL, topic, 0) })

	big := keyed("big", 0)
	big.Payload = make([]byte, serverLimit+1<<20)
	_, _ = rand.Read(big.Payload)
	errs := pub.PublishEach(context.Background(), topic, []*message.Message{big, keyed("big", 1)})
	if !errors.Is(errs[0], rabbitmq.ErrMessageTooLarge) || rabbitmq.Retriable(errs[0]) {
		t.Errorf("the message above the server's limit: %v (retriable %v), want ErrMessageTooLarge, permanent",
			errs[0], rabbitmq.Retriable(errs[0]))
	}
	if !rabbitmq.Retriable(errs[1]) {
		t.Errorf("the later message of its key: %v, want a retriable error (held back)", errs[1])
	}

	errs = pub.PublishEach(context.Background(), topic, []*message.Message{big, keyed("other", 2)})
	if !errors.Is(errs[0], rabbitmq.ErrMessageTooLarge) || rabbitmq.Retriable(errs[0]) {
		t.Errorf("the same message again: %v, want ErrMessageTooLarge before sending", errs[0])
	}
	if errs[1] != nil {
		t.Errorf("the other key's message, with the large one refused before sending: %v, want it confirmed", errs[1])
	}
}
