package nats_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxkit/outboxkit/brokers/nats"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport/natsserver"
)

// The default dead-letter topic of this package is the forwarder's.
func TestDefaultDeadLetterTopicIsTheForwarders(t *testing.T) {
	if nats.DefaultDeadLetterTopic != forwarder.DefaultDeadLetterTopic {
		t.Errorf("nats.DefaultDeadLetterTopic %q, forwarder.DefaultDeadLetterTopic %q", nats.DefaultDeadLetterTopic, forwarder.DefaultDeadLetterTopic)
	}
}

// Publishers with 0 and 4 partitions publish to the default dead-letter topic and to a topic of
// Config.DeadLetterTopics: each into one stream holding <topic>.*, whatever the partitions; an
// ordinary topic still follows Partitions.
func TestDeadLetterTopicsHaveOneLayout(t *testing.T) {
	srv := natsserver.Start(t, natsserver.Options{})
	for _, partitions := range []int{0, 4, 0} {
		pub := newPublisher(t, nats.Config{URLs: []string{srv.URL()}, Partitions: partitions, DeadLetterTopics: []string{"mine.dead"}})
		for _, topic := range []string{nats.DefaultDeadLetterTopic, "mine.dead"} {
			if errs := pub.PublishEach(context.Background(), topic, []*message.Message{keyed("k", partitions)}); errs[0] != nil {
				t.Fatalf("partitions %d, topic %s: %v", partitions, topic, errs[0])
			}
		}
	}
	for _, topic := range []string{nats.DefaultDeadLetterTopic, "mine.dead"} {
		got := readStream(t, srv.URL(), topic)
		if len(got) != 3 {
			t.Fatalf("%s holds %d messages, want 3", topic, len(got))
		}
		for _, m := range got {
			if !strings.HasPrefix(m.subject, topic+".") {
				t.Errorf("a dead letter on %s, want %s.<p>", m.subject, topic)
			}
		}
	}
	pub := newPublisher(t, nats.Config{URLs: []string{srv.URL()}, Partitions: 4})
	if errs := pub.PublishEach(context.Background(), "orders", []*message.Message{keyed("k", 0)}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	want := (nats.Config{Partitions: 4}).Subject("orders", "k")
	if got := readStream(t, srv.URL(), "orders"); len(got) != 1 || got[0].subject != want {
		t.Errorf("an ordinary topic: %+v, want its partition subject", got)
	}
}

// A dead-letter stream an earlier version created with partitions 0 (subjects <topic>) gets
// <topic>.* added, keeping the old one: its dead letters stay, and relays of both versions share
// it during a rolling upgrade. With DisableStreamCreation it is refused
// (ErrStreamMismatch), streams being the operator's job.
func TestDeadLetterStreamOfAnEarlierVersionIsUpgraded(t *testing.T) {
	srv := natsserver.Start(t, natsserver.Options{})
	nc, err := natsgo.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := nats.DefaultDeadLetterTopic
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: nats.StreamName(topic), Subjects: []string{topic}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, topic, []byte("old")); err != nil {
		t.Fatal(err)
	}

	manual := newPublisher(t, nats.Config{URLs: []string{srv.URL()}, Partitions: 4, DisableStreamCreation: true})
	if err := manual.Connect(topic); err == nil {
		t.Errorf("with disable_stream_creation, the old stream was accepted or changed")
	}
	pub := newPublisher(t, nats.Config{URLs: []string{srv.URL()}, Partitions: 4})
	if err := pub.Connect(topic); err != nil {
		t.Fatalf("connect to the old dead-letter stream: %v", err)
	}
	if errs := pub.PublishEach(ctx, topic, []*message.Message{keyed("k", 1)}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	stream, err := js.Stream(ctx, nats.StreamName(topic))
	if err != nil {
		t.Fatal(err)
	}
	info := stream.CachedInfo()
	if subjects := info.Config.Subjects; len(subjects) != 2 || subjects[0] != topic || subjects[1] != topic+".*" {
		t.Errorf("upgraded stream's subjects %v, want [%s %s.*]", subjects, topic, topic)
	}
	if info.State.Msgs != 2 {
		t.Errorf("upgraded stream holds %d messages, want the old dead letter and the new one", info.State.Msgs)
	}
}
