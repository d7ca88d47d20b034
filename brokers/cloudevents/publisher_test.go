package cloudevents_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	kafkasarama "github.com/cloudevents/sdk-go/protocol/kafka_sarama/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/brokers/cloudevents"
	"github.com/outboxkit/outboxkit/outbox"
)

// recorder is a plain message.Publisher that keeps what it was given.
type recorder struct {
	mu     sync.Mutex
	topics []string
	got    []*message.Message
	closed bool
}

func (r *recorder) Publish(topic string, msgs ...*message.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for range msgs {
		r.topics = append(r.topics, topic)
	}
	r.got = append(r.got, msgs...)
	return nil
}

func (r *recorder) Close() error { r.closed = true; return nil }

// eachRecorder also has PublishEach; it fails the messages whose payload is "fail".
type eachRecorder struct {
	recorder
	calls int
}

var errBroker = errors.New("broker says no")

func (r *eachRecorder) PublishEach(_ context.Context, topic string, msgs []*message.Message) []error {
	r.calls++
	_ = r.Publish(topic, msgs...)
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if string(m.Payload) == "fail" {
			errs[i] = errBroker
		}
	}
	return errs
}

type connectRecorder struct {
	recorder
	connected []string
}

func (r *connectRecorder) Connect(topic string) error {
	r.connected = append(r.connected, topic)
	return nil
}

type eachConnectRecorder struct {
	eachRecorder
	connected []string
}

func (r *eachConnectRecorder) Connect(topic string) error {
	r.connected = append(r.connected, topic)
	return nil
}

var testConfig = cloudevents.Config{Source: "/tests/billing"}

func newPublisher(t *testing.T, inner message.Publisher) message.Publisher {
	t.Helper()
	pub, err := cloudevents.NewPublisher(inner, testConfig)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func testEvent(t *testing.T) outbox.Event {
	t.Helper()
	e, err := outbox.NewJSONEvent("orders", "order", "order-42", "OrderPlaced", map[string]int{"total": 42})
	if err != nil {
		t.Fatal(err)
	}
	e.ID = uuid.Must(uuid.NewV7())
	e.TenantID = "acme"
	e.Headers["trace"] = "t-1"
	e.CreatedAt = time.Date(2026, 12, 1, 9, 30, 15, 123456000, time.FixedZone("CET", 3600))
	return e
}

func TestAttributesFromTheOutboxEvent(t *testing.T) {
	rec := &recorder{}
	pub := newPublisher(t, rec)
	e := testEvent(t)
	msg := e.ToMessage()
	type ctxKey struct{}
	msg.SetContext(context.WithValue(context.Background(), ctxKey{}, "carried"))
	before := msg.Metadata.Get(cloudevents.AttrID)

	if err := pub.Publish("orders", msg); err != nil {
		t.Fatal(err)
	}
	if len(rec.got) != 1 || rec.topics[0] != "orders" {
		t.Fatalf("recorded %d messages on %v", len(rec.got), rec.topics)
	}
	got := rec.got[0]
	want := map[string]string{
		cloudevents.AttrID:          e.ID.String(),
		cloudevents.AttrType:        "OrderPlaced",
		cloudevents.AttrSource:      "/tests/billing",
		cloudevents.AttrSubject:     "order-42",
		cloudevents.AttrTime:        "2026-12-01T08:30:15.123456Z",
		cloudevents.AttrSpecVersion: "1.0",
		cloudevents.ContentType:     "application/json",
	}
	for k, v := range want {
		if got.Metadata.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, got.Metadata.Get(k), v)
		}
	}
	for k, v := range msg.Metadata { // the outbox fields and headers are kept
		if got.Metadata.Get(k) != v {
			t.Errorf("outbox metadata %s = %q, want %q kept", k, got.Metadata.Get(k), v)
		}
	}
	if len(got.Metadata) != len(msg.Metadata)+6 {
		t.Errorf("metadata %v: want the %d original entries plus 6 ce_ attributes", got.Metadata, len(msg.Metadata))
	}
	if got.UUID != msg.UUID || string(got.Payload) != string(msg.Payload) {
		t.Errorf("uuid %s payload %s, want %s %s", got.UUID, got.Payload, msg.UUID, msg.Payload)
	}
	if got.Context().Value(ctxKey{}) != "carried" {
		t.Error("the message context was not carried over")
	}
	if msg.Metadata.Get(cloudevents.AttrID) != before || got == msg {
		t.Error("the caller's message was modified")
	}
}

// The SDK's Kafka binding reads the attributes the publisher sets (here from headers built by
// hand; the test against the real Kafka is in brokers/brokerconfig).
func TestTheSDKReadsTheAttributes(t *testing.T) {
	rec := &recorder{}
	e := testEvent(t)
	if err := newPublisher(t, rec).Publish("orders", e.ToMessage()); err != nil {
		t.Fatal(err)
	}
	got := rec.got[0]
	headers := map[string][]byte{}
	for k, v := range got.Metadata {
		headers[k] = []byte(v)
	}
	ev, err := binding.ToEvent(context.Background(), kafkasarama.NewMessage(got.Payload, got.Metadata.Get("content-type"), headers))
	if err != nil {
		t.Fatalf("the SDK cannot read the message: %v", err)
	}
	if err := ev.Validate(); err != nil {
		t.Fatalf("invalid CloudEvent: %v", err)
	}
	if ev.ID() != e.ID.String() || ev.Type() != "OrderPlaced" || ev.Source() != "/tests/billing" ||
		ev.Subject() != "order-42" || !ev.Time().Equal(e.CreatedAt) || ev.SpecVersion() != "1.0" ||
		ev.DataContentType() != "application/json" || string(ev.Data()) != `{"total":42}` {
		t.Errorf("event as the SDK reads it:\n%s", ev)
	}
}

func TestOptionalAttributesAndContentTypeSpelling(t *testing.T) {
	rec := &recorder{}
	pub := newPublisher(t, rec)
	msg := message.NewMessage(watermill.NewUUID(), []byte("x"))
	msg.Metadata.Set(outbox.MetadataEventType, "Pinged")
	msg.Metadata.Set("Content-Type", "text/plain")
	msg.Metadata.Set(cloudevents.AttrSubject, "stale") // the publisher owns the ce_ attributes
	msg.Metadata.Set(cloudevents.AttrTime, "stale")
	msg.Metadata.Set("ce_traceid", "kept") // other ce_ entries travel as extensions
	if err := pub.Publish("pings", msg); err != nil {
		t.Fatal(err)
	}
	got := rec.got[0].Metadata
	if got.Get(cloudevents.AttrID) != msg.UUID {
		t.Errorf("ce_id %q, want the message UUID %q when event_id is absent", got.Get(cloudevents.AttrID), msg.UUID)
	}
	if _, ok := got[cloudevents.AttrSubject]; ok {
		t.Errorf("ce_subject %q set without an aggregate id", got.Get(cloudevents.AttrSubject))
	}
	if _, ok := got[cloudevents.AttrTime]; ok {
		t.Errorf("ce_time %q set without created_at", got.Get(cloudevents.AttrTime))
	}
	if got.Get("content-type") != "text/plain" || got.Get("Content-Type") != "text/plain" || got.Get("ce_traceid") != "kept" {
		t.Errorf("metadata %v", got)
	}
}

func TestPublishRefusesWhatIsNotAnEvent(t *testing.T) {
	good := testEvent(t).ToMessage()
	noType := message.NewMessage(watermill.NewUUID(), []byte("x"))
	badTime := testEvent(t).ToMessage()
	badTime.Metadata.Set(outbox.MetadataCreatedAt, "yesterday")
	noID := message.NewMessage("", []byte("x"))
	noID.Metadata.Set(outbox.MetadataEventType, "T")
	for name, tc := range map[string]struct {
		msg  *message.Message
		want string
	}{
		"no event type": {noType, "has no event_type metadata"},
		"bad time":      {badTime, `created_at "yesterday" is not an RFC 3339 time`},
		"no id":         {noID, "neither event_id metadata nor a UUID"},
		"nil":           {nil, "nil message"},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			err := newPublisher(t, rec).Publish("orders", good, tc.msg)
			if !errors.Is(err, cloudevents.ErrNotAnEvent) || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "message 1 of 2") {
				t.Errorf("error %v, want ErrNotAnEvent with %q", err, tc.want)
			}
			if len(rec.got) != 0 {
				t.Errorf("%d messages published although one is not an event", len(rec.got))
			}
		})
	}
}

// A message that is not an event fails alone with ErrNotAnEvent; the later messages of its key
// (its aggregate id) fail with ErrEarlierMessageInvalid, unsent; every other message is sent, and
// the wrapped publisher's outcomes are passed through.
func TestPublishEachFailsOnlyTheKeyOfAMessageThatIsNotAnEvent(t *testing.T) {
	rec := &eachRecorder{}
	pub := newPublisher(t, rec).(interface {
		PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error
	})
	event := func(id string) *message.Message {
		e := testEvent(t)
		e.AggregateID = id
		return e.ToMessage()
	}
	ok1, failing := event("a"), event("a")
	failing.Payload = []byte("fail")
	bad := event("b")
	delete(bad.Metadata, outbox.MetadataEventType)
	afterBad, otherKey := event("b"), event("c")

	errs := pub.PublishEach(context.Background(), "orders", []*message.Message{ok1, failing, bad, afterBad, otherKey, nil})
	if len(errs) != 6 {
		t.Fatalf("%d errors for 6 messages", len(errs))
	}
	if errs[0] != nil || !errors.Is(errs[1], errBroker) || errs[4] != nil {
		t.Errorf("the wrapped publisher's outcomes not passed through: %v, %v, %v", errs[0], errs[1], errs[4])
	}
	if !errors.Is(errs[2], cloudevents.ErrNotAnEvent) || !errors.Is(errs[5], cloudevents.ErrNotAnEvent) {
		t.Errorf("messages 2 and 5: %v, %v, want ErrNotAnEvent", errs[2], errs[5])
	}
	if !errors.Is(errs[3], cloudevents.ErrEarlierMessageInvalid) {
		t.Errorf("message 3, a later one of the refused message's key: %v, want ErrEarlierMessageInvalid", errs[3])
	}
	if rec.calls != 1 || len(rec.got) != 3 || rec.got[0].UUID != ok1.UUID || rec.got[2].UUID != otherKey.UUID ||
		rec.got[0].Metadata.Get(cloudevents.AttrType) != "OrderPlaced" {
		t.Errorf("the wrapped publisher got %d messages in %d calls, want ok1, failing and the other key's, converted", len(rec.got), rec.calls)
	}

	// After a nil message (its key unknown), nothing more is sent.
	rec.got, rec.calls = nil, 0
	errs = pub.PublishEach(context.Background(), "orders", []*message.Message{nil, ok1})
	if rec.calls != 0 || !errors.Is(errs[0], cloudevents.ErrNotAnEvent) || !errors.Is(errs[1], cloudevents.ErrEarlierMessageInvalid) {
		t.Errorf("errors %v, %d calls", errs, rec.calls)
	}
}

// The decorator has exactly the optional methods of the publisher it wraps.
func TestOptionalMethodsFollowTheWrappedPublisher(t *testing.T) {
	type each interface {
		PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error
	}
	type connect interface{ Connect(topic string) error }
	plain, withEach, withConnect, withBoth := &recorder{}, &eachRecorder{}, &connectRecorder{}, &eachConnectRecorder{}
	for name, tc := range map[string]struct {
		inner         message.Publisher
		each, connect bool
	}{
		"plain":        {plain, false, false},
		"PublishEach":  {withEach, true, false},
		"Connect":      {withConnect, false, true},
		"both methods": {withBoth, true, true},
	} {
		t.Run(name, func(t *testing.T) {
			pub := newPublisher(t, tc.inner)
			_, hasEach := pub.(each)
			c, hasConnect := pub.(connect)
			if hasEach != tc.each || hasConnect != tc.connect {
				t.Fatalf("PublishEach %v Connect %v, want %v %v", hasEach, hasConnect, tc.each, tc.connect)
			}
			if hasConnect {
				if err := c.Connect("orders"); err != nil {
					t.Fatal(err)
				}
			}
			if err := pub.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
	if !plain.closed || !withEach.closed || !withConnect.closed || !withBoth.closed {
		t.Error("Close did not close the wrapped publisher")
	}
	if len(withConnect.connected) != 1 || len(withBoth.connected) != 1 {
		t.Error("Connect was not passed on")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, ok := range []string{"/billing", "https://example.com/billing", "urn:example:billing",
		"billing", "//host/path", "mailto:ops@example.com", "/a%20b", "https://[::1]:8080/x?q=1#f"} {
		if err := (cloudevents.Config{Source: ok}).Validate(); err != nil {
			t.Errorf("source %q: %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"":                "source: missing",
		"a b":             `source: "a b" is not a URI-reference: character ' ' at offset 1`,
		"/caf\u00e9":      `source: "/café" is not a URI-reference: character`,
		"/a%zz":           `source: "/a%zz" is not a URI-reference: invalid URL escape`,
		":billing":        `source: ":billing" is not a URI-reference: missing protocol scheme`,
		"1a:b":            `source: "1a:b" is not a URI-reference: first path segment in URL cannot contain colon`,
		"http://h:port/x": `source: "http://h:port/x" is not a URI-reference: invalid port`,
		"/a\"b":           `character '"'`,
	} {
		err := (cloudevents.Config{Source: bad}).Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("source %q: error %v, want it to contain %q", bad, err, want)
		}
	}
	if _, err := cloudevents.NewPublisher(&recorder{}, cloudevents.Config{}); err == nil ||
		!strings.Contains(err.Error(), "cloudevents: source: missing") {
		t.Errorf("NewPublisher without a source: %v", err)
	}
	if _, err := cloudevents.NewPublisher(nil, testConfig); err == nil {
		t.Error("NewPublisher(nil) succeeded")
	}
}
