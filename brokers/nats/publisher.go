package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// UUIDHeader is the header holding the Watermill message UUID: watermill-nats' own
// (NATSMarshaler), so its subscribers read these messages too.
const UUIDHeader = "_watermill_message_uuid"

// Publisher is a Watermill message.Publisher for NATS JetStream and the relay's
// forwarder.OutcomePublisher. It creates a topic's stream on first use (unless
// Config.DisableStreamCreation) and returns from Publish and PublishEach only once JetStream
// acknowledged, or failed, every message.
type Publisher struct {
	config Config
	logger watermill.LoggerAdapter
	nc     *natsgo.Conn
	js     jetstream.JetStream

	// closeMu is held for reading by every publish call and for writing by Close; closing is
	// closed first, so the calls in flight stop waiting and Close does not wait for their
	// acknowledgements.
	closeMu   sync.RWMutex
	closed    bool
	closing   chan struct{}
	closeOnce sync.Once

	streams *streams
}

var _ message.Publisher = (*Publisher)(nil)

// NewPublisher validates config, fills its defaults and connects. Streams are created lazily.
func NewPublisher(config Config, logger watermill.LoggerAdapter) (*Publisher, error) {
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	config.SetDefaults()
	if err := config.Validate(); err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	nc, err := config.connect()
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(config.MaxPending),
		jetstream.WithPublishAsyncTimeout(config.PublishTimeout),
	)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	return &Publisher{
		config:  config,
		logger:  logger,
		nc:      nc,
		js:      js,
		closing: make(chan struct{}),
		streams: newStreams(config, js),
	}, nil
}

// Publish publishes msgs to topic and returns once each was acknowledged; the error joins the
// failures of PublishEach. Messages of one key (Config.KeyMetadata) are stored in the given
// order.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	return errors.Join(p.PublishEach(context.Background(), topic, msgs)...)
}

// Connect creates (or finds) the stream of topic now, so that an unreachable server, refused
// credentials or a bad stream configuration stop a relay at start (cmd/outboxkit calls it on
// the dead-letter topic).
func (p *Publisher) Connect(topic string) error {
	if err := checkTopic(topic); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.config.PublishTimeout)
	defer cancel()
	_, err := p.streams.ensure(ctx, topic)
	return err
}

// Close stops the calls in flight (their messages without an acknowledgement fail with
// ErrPublisherClosed), waits for them to return and closes the connection. Idempotent.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() { close(p.closing) })
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.nc.Close()
	return nil
}

// Retriable classifies the publisher's errors (see the package function Retriable). The
// forwarder uses it when its Config.IsRetriable is not set (forwarder.ErrorClassifier).
func (p *Publisher) Retriable(err error) bool { return Retriable(err) }

// toNATS converts msg to the NATS message published to subject: the payload as the data, the
// UUID in UUIDHeader and as Nats-Msg-Id (JetStream's deduplication key), every metadata entry
// as a header. Header names and values must not break the header block.
func toNATS(subject string, msg *message.Message) (*natsgo.Msg, error) {
	h := make(natsgo.Header, len(msg.Metadata)+2)
	for k, v := range msg.Metadata {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") || strings.ContainsAny(v, "\r\n") {
			return nil, fmt.Errorf("nats: message %s: metadata entry %q cannot be a NATS header (no empty name, "+
				"no whitespace or ':' in the name, no line break in the value): %w", msg.UUID, k, ErrInvalidMessage)
		}
		if k == UUIDHeader || k == jetstream.MsgIDHeader {
			if v != msg.UUID {
				return nil, fmt.Errorf("nats: message %s: metadata entry %s is reserved for the message UUID (has %q): %w",
					msg.UUID, k, v, ErrInvalidMessage)
			}
			continue
		}
		h[k] = []string{v}
	}
	h[UUIDHeader] = []string{msg.UUID}
	return &natsgo.Msg{Subject: subject, Data: msg.Payload, Header: h}, nil
}

// streams creates or finds the stream of each topic once, and remembers the result.
type streams struct {
	config Config
	js     jetstream.JetStream

	mu    sync.Mutex
	known map[string]*streamSlot
}

type streamSlot struct {
	ready chan struct{}
	name  string
	err   error
}

func newStreams(config Config, js jetstream.JetStream) *streams {
	return &streams{config: config, js: js, known: map[string]*streamSlot{}}
}

// ensure returns the name of the stream of topic, creating it if missing (unless
// DisableStreamCreation). A failure is not remembered: the next call tries again.
func (s *streams) ensure(ctx context.Context, topic string) (string, error) {
	s.mu.Lock()
	slot, ok := s.known[topic]
	if !ok {
		slot = &streamSlot{ready: make(chan struct{})}
		s.known[topic] = slot
		s.mu.Unlock()
		slot.name, slot.err = s.create(ctx, topic)
		if slot.err != nil {
			s.mu.Lock()
			delete(s.known, topic)
			s.mu.Unlock()
		}
		close(slot.ready)
		return slot.name, slot.err
	}
	s.mu.Unlock()
	select {
	case <-slot.ready:
		return slot.name, slot.err
	case <-ctx.Done():
		return "", fmt.Errorf("nats: stream of topic %s: %w", topic, ctx.Err())
	}
}

// create finds or creates the stream of topic and checks that it holds the topic's subjects.
func (s *streams) create(ctx context.Context, topic string) (string, error) {
	want := s.config.streamConfig(topic)
	stream, err := s.js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) && !s.config.DisableStreamCreation {
		stream, err = s.js.CreateStream(ctx, want)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			stream, err = s.js.Stream(ctx, want.Name) // created meanwhile by another client
		}
	}
	if err != nil {
		return "", fmt.Errorf("nats: stream %s of topic %s: %w", want.Name, topic, err)
	}
	subjects := stream.CachedInfo().Config.Subjects
	if slices.Contains(subjects, want.Subjects[0]) {
		return want.Name, nil
	}
	if s.upgradable(topic, subjects) {
		if err := s.addSubject(ctx, stream, want.Subjects[0]); err != nil {
			return "", fmt.Errorf("nats: stream %s of dead-letter topic %s: %w", want.Name, topic, err)
		}
		return want.Name, nil
	}
	return "", fmt.Errorf("nats: stream %s exists with subjects %v, not %s (another topic's, or partitions changed): %w",
		want.Name, subjects, want.Subjects[0], ErrStreamMismatch)
}

// upgradable reports whether the stream of the dead-letter topic topic holds the one subject
// of the layout of earlier versions with Partitions 0 (<topic>, when their dead-letter topic
// followed Partitions), to which <topic>.* is added rather than refused, unless streams are the
// operator's job. Relays of both versions then share the stream during a rolling upgrade: the
// old ones publish to <topic>, the new ones to <topic>.<p>.
func (s *streams) upgradable(topic string, subjects []string) bool {
	return !s.config.DisableStreamCreation && s.config.deadLetterTopic(topic) &&
		len(subjects) == 1 && subjects[0] == topic
}

// addSubject adds subject to the stream's subjects.
func (s *streams) addSubject(ctx context.Context, stream jetstream.Stream, subject string) error {
	cfg := stream.CachedInfo().Config
	cfg.Subjects = append(slices.Clone(cfg.Subjects), subject)
	if _, err := s.js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("add subject %s to the subjects %v of an earlier version: %w", subject, stream.CachedInfo().Config.Subjects, err)
	}
	return nil
}
