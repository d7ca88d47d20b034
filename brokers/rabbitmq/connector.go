package rabbitmq

import (
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// connector holds the publisher's AMQP connection and opens a new one when the last one was
// lost (the broker restarted, a heartbeat timed out): the next call after a loss reconnects.
type connector struct {
	config Config

	mu     sync.Mutex
	conn   *amqp.Connection
	closed bool
}

// channel opens a channel, connecting first when there is no live connection.
func (c *connector) channel() (*amqp.Channel, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrPublisherClosed
	}
	for attempt := 0; ; attempt++ {
		if c.conn == nil || c.conn.IsClosed() {
			conn, err := c.config.dial()
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrConnection, err)
			}
			c.conn = conn
		}
		ch, err := c.conn.Channel()
		if err == nil {
			return ch, nil
		}
		if attempt > 0 || !c.conn.IsClosed() {
			return nil, fmt.Errorf("rabbitmq: open channel: %w: %w", ErrConnection, err)
		}
		// The connection died after the IsClosed check: connect again once.
	}
}

// close closes the connection; later channel calls fail with ErrPublisherClosed.
func (c *connector) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.conn != nil {
		_ = c.conn.Close()
	}
}

// maxWave bounds the messages a call has in flight on its channel at once; the channel's
// return buffer holds that many, so the connection's reader never blocks on it.
const maxWave = 512

// confirmChannel is a channel in confirm mode with its returns and close reason.
type confirmChannel struct {
	ch       *amqp.Channel
	returns  chan amqp.Return
	closes   chan *amqp.Error
	reason   *amqp.Error
	returned map[string]amqp.Return // by message-id (the message UUID)
}

func (c *connector) confirmChannel() (*confirmChannel, error) {
	ch, err := c.channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("rabbitmq: confirm mode: %w", err)
	}
	return &confirmChannel{
		ch:       ch,
		returns:  ch.NotifyReturn(make(chan amqp.Return, maxWave)),
		closes:   ch.NotifyClose(make(chan *amqp.Error, 1)),
		returned: map[string]amqp.Return{},
	}, nil
}

// drainReturns moves the returns received so far into returned. amqp091-go hands a
// basic.return to the returns channel before it resolves the confirmation of the same message
// (both arrive, in that order, on the connection's one reader), so once a message's
// confirmation is resolved its return, if any, is in the channel.
func (cc *confirmChannel) drainReturns() {
	for {
		select {
		case r, ok := <-cc.returns:
			if !ok {
				return
			}
			cc.returned[r.MessageId] = r
		default:
			return
		}
	}
}

// closedErr returns why the channel is closed, or nil while it is open.
func (cc *confirmChannel) closedErr() error {
	if !cc.ch.IsClosed() {
		return nil
	}
	select {
	case reason, ok := <-cc.closes:
		if ok {
			cc.reason = reason
		}
	default:
	}
	return closeReason(cc.reason)
}

// channelPool keeps confirm-mode channels between calls.
type channelPool struct {
	conn *connector
	idle chan *confirmChannel
}

func newChannelPool(conn *connector, size int) *channelPool {
	return &channelPool{conn: conn, idle: make(chan *confirmChannel, size)}
}

// acquire returns an open idle channel, or a new one.
func (p *channelPool) acquire() (*confirmChannel, error) {
	for {
		select {
		case cc := <-p.idle:
			if !cc.ch.IsClosed() {
				return cc, nil
			}
		default:
			return p.conn.confirmChannel()
		}
	}
}

// release keeps cc for the next call when it is clean (open, every confirmation resolved) and
// there is room, and closes it otherwise.
func (p *channelPool) release(cc *confirmChannel, clean bool) {
	if clean && !cc.ch.IsClosed() {
		clear(cc.returned)
		select {
		case p.idle <- cc:
			return
		default:
		}
	}
	_ = cc.ch.Close()
}

// drain closes the idle channels.
func (p *channelPool) drain() {
	for {
		select {
		case cc := <-p.idle:
			_ = cc.ch.Close()
		default:
			return
		}
	}
}
