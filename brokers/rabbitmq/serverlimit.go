package rabbitmq

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The server's message size limit. RabbitMQ does not announce its max_message_size when a
// connection opens; it refuses a larger message by closing the channel with 406
// PRECONDITION_FAILED and a reason naming the message's size and the limit ("message size
// 17825792 is larger than configured max size 16777216", rabbit_channel's check_msg_size). A
// publisher whose Config.MaxMessageSize is above the server's learns the limit from that reason:
// the message it names is refused for good (ErrMessageTooLarge), and from then on a larger
// message is refused before it is sent, so one event cannot keep closing channels and spend
// its attempts (and its dead letter's) on retriable channel closes.

// serverSizeRefusalRE matches the reason of the server's size refusal.
var serverSizeRefusalRE = regexp.MustCompile(`message size (\d+) is larger than (?:configured )?max size (\d+)`)

// serverSizeLimit returns the limit named by reason when it is the server's refusal of a message
// above its max_message_size.
func serverSizeLimit(reason error) (int, bool) {
	var amqpErr *amqp.Error
	if !errors.As(reason, &amqpErr) || amqpErr.Code != amqp.PreconditionFailed {
		return 0, false
	}
	m := serverSizeRefusalRE.FindStringSubmatch(amqpErr.Reason)
	if m == nil {
		return 0, false
	}
	limit, err := strconv.Atoi(m[2])
	if err != nil || limit < 1 {
		return 0, false
	}
	return limit, true
}

// learnServerLimit lowers the publisher's size limit to the server's, when smaller.
func (p *Publisher) learnServerLimit(limit int) {
	for {
		cur := p.serverLimit.Load()
		if cur != 0 && cur <= int64(limit) {
			return
		}
		if p.serverLimit.CompareAndSwap(cur, int64(limit)) {
			p.logger.Error("The RabbitMQ server refused a message above its max_message_size: larger messages are "+
				"refused before sending from now on; set rabbitmq.max_message_size to at most the server's",
				nil, map[string]any{"server_max_message_size": limit, "max_message_size": p.config.MaxMessageSize})
			return
		}
	}
}

// checkSize refuses a payload above Config.MaxMessageSize or the server's limit once learned.
func (p *Publisher) checkSize(uuid string, payload []byte) error {
	if len(payload) > p.config.MaxMessageSize {
		return fmt.Errorf("rabbitmq: message %s: payload of %d bytes, max_message_size %d: %w",
			uuid, len(payload), p.config.MaxMessageSize, ErrMessageTooLarge)
	}
	if limit := p.serverLimit.Load(); limit > 0 && int64(len(payload)) > limit {
		return fmt.Errorf("rabbitmq: message %s: payload of %d bytes, above the server's max_message_size %d "+
			"(learned from an earlier refusal; rabbitmq.max_message_size %d is above it): %w",
			uuid, len(payload), limit, p.config.MaxMessageSize, ErrMessageTooLarge)
	}
	return nil
}
