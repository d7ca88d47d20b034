package nats_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxkit/outboxkit/brokers/nats"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/internal/testsupport/natsserver"
)

var (
	_ forwarder.OutcomePublisher = (*nats.Publisher)(nil)
	_ forwarder.ErrorClassifier  = (*nats.Publisher)(nil)
)

// keyed returns a message of key with payload "key/seq".
func keyed(key string, seq int) *message.Message {
	msg := message.NewMessage(watermill.NewUUID(), []byte(key+"/"+strconv.Itoa(seq)))
	msg.Metadata.Set(nats.DefaultKeyMetadata, key)
	return msg
}

// stored is a message read back from a stream.
type stored struct {
	subject string
	uuid    string
	key     string
	payload string
}

// readStream returns every message of the stream of topic, in stream order.
func readStream(t *testing.T, url, topic string) []stored {
	t.Helper()
	var out []stored
	for _, m := range testsupport.ReadNATSStream(t, url, nats.StreamName(topic)) {
		out = append(out, stored{m.Subject, m.Header.Get(nats.UUIDHeader), m.Header.Get(nats.DefaultKeyMetadata), string(m.Data)})
	}
	return out
}

// checkPerKeyOrder fails t unless, per key, the payloads "key/0", "key/1", ... appear in
// order, each once, want of them per key.
func checkPerKeyOrder(t *testing.T, msgs []stored, want map[string]int) {
	t.Helper()
	next := map[string]int{}
	for _, m := range msgs {
		if exp := m.key + "/" + strconv.Itoa(next[m.key]); m.payload != exp {
			t.Fatalf("key %s: got %s, want %s (out of order or duplicated)", m.key, m.payload, exp)
		}
		next[m.key]++
	}
	for key, n := range want {
		if next[key] != n {
			t.Errorf("key %s: %d messages stored, want %d", key, next[key], n)
		}
	}
}

// TestPublishEachPerKeyOrder: many keys, several messages each, interleaved in one call and in
// concurrent calls on disjoint keys: every message acknowledged, per-key order in the stream,
// with a topic as one subject and with partitions (each key on its partition's subject).
func TestPublishEachPerKeyOrder(t *testing.T) {
	srv := natsserver.Start(t, natsserver.Options{})
	for _, partitions := range []int{0, 8} {
		t.Run("partitions-"+strconv.Itoa(partitions), func(t *testing.T) {
			cfg := nats.Config{URLs: []string{srv.URL()}, Partitions: partitions}
			pub := newPublisher(t, cfg)
			topic := "order.p" + strconv.Itoa(partitions)
			const calls, keys, perKey = 4, 50, 10
			want := map[string]int{}
			var wg sync.WaitGroup
			for c := range calls {
				var msgs []*message.Message
				for seq := range perKey {
					for k := range keys {
						key := fmt.Sprintf("c%d-k%d", c, k)
						msgs = append(msgs, keyed(key, seq))
						want[key] = perKey
					}
				}
				wg.Go(func() {
					for i, err := range pub.PublishEach(context.Background(), topic, msgs) {
						if err != nil {
							t.Errorf("message %d: %v", i, err)
						}
					}
				})
			}
			wg.Wait()
			got := readStream(t, srv.URL(), topic)
			checkPerKeyOrder(t, got, want)
			if partitions > 0 {
				for _, m := range got {
					if wantSubject := cfg.Subject(topic, m.key); m.subject != wantSubject {
						t.Fatalf("key %s stored on %s, want %s", m.key, m.subject, wantSubject)
					}
				}
			}
		})
	}
}

// TestPublishEachOversizedFailsAlone: a message above the server's max_payload fails alone and
// permanently; the later messages of its key fail retriably without being sent (gapless), the
// earlier ones and every other key are stored. The same with a stream whose max_msg_size is
// checked by the server, after the send (an asynchronous failure).
func TestPublishEachOversizedFailsAlone(t *testing.T) {
	srv := natsserver.Start(t, natsserver.Options{MaxPayload: 64 << 10})
	for _, tc := range []struct {
		name string
		big  int
		prep func(t *testing.T, topic string)
	}{
		{"server max_payload", 100 << 10, func(*testing.T, string) {}},
		{"stream max_msg_size", 8 << 10, func(t *testing.T, topic string) {
			nc, err := natsgo.Connect(srv.URL())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, _ := jetstream.New(nc)
			_, err = js.CreateStream(context.Background(), jetstream.StreamConfig{
				Name: nats.StreamName(topic), Subjects: []string{topic}, MaxMsgSize: 4 << 10,
			})
			if err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "oversized." + strconv.Itoa(tc.big)
			tc.prep(t, topic)
			pub := newPublisher(t, nats.Config{URLs: []string{srv.URL()}})
			big := keyed("a", 1)
			big.Payload = bytes.Repeat([]byte("x"), tc.big)
			msgs := []*message.Message{keyed("a", 0), keyed("b", 0), big, keyed("b", 1), keyed("a", 2), keyed("b", 2)}
			errs := pub.PublishEach(context.Background(), topic, msgs)
			if len(errs) != len(msgs) {
				t.Fatalf("%d outcomes for %d messages", len(errs), len(msgs))
			}
			for _, i := range []int{0, 1, 3, 5} {
				if errs[i] != nil {
					t.Errorf("message %d: %v", i, errs[i])
				}
			}
			if errs[2] == nil || pub.Retriable(errs[2]) {
				t.Errorf("oversized message: got %v, want a permanent error", errs[2])
			}
			if !errors.Is(errs[4], nats.ErrEarlierMessageFailed) || !pub.Retriable(errs[4]) {
				t.Errorf("message after the oversized one: got %v, want ErrEarlierMessageFailed (retriable)", errs[4])
			}
			got := readStream(t, srv.URL(), topic)
			var payloads []string
			for _, m := range got {
				payloads = append(payloads, m.payload)
			}
			if fmt.Sprint(payloads) != "[a/0 b/0 b/1 b/2]" {
				t.Errorf("stored %v, want [a/0 b/0 b/1 b/2]", payloads)
			}
		})
	}
}

// TestPublishEachCloseWhileInFlight: with the server gone, PublishEach waits for
// acknowledgements that cannot come; Close ends the call: exactly one retriable error per
// message, and nothing panics. PublishTimeout is far longer than the test's bound against a hang,
// so a call waiting for acknowledgements can only end through Close. (The client may also fail a
// message at once with "server is disconnected", also retriable: then nothing was in flight.)
func TestPublishEachCloseWhileInFlight(t *testing.T) {
	srv := natsserver.Start(t, natsserver.Options{})
	pub, err := nats.NewPublisher(nats.Config{URLs: []string{srv.URL()}, PublishTimeout: time.Hour}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Connect("inflight"); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	msgs := []*message.Message{keyed("a", 0), keyed("a", 1), keyed("b", 0)}
	done := make(chan []error)
	go func() { done <- pub.PublishEach(context.Background(), "inflight", msgs) }()
	// Usually the call is in flight by now; if it has not started, Close comes first and the
	// call meets a closed publisher (ErrPublisherClosed, retriable too).
	time.Sleep(300 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- pub.Close() }() // Close waits for the calls it stops
	hang := time.After(2 * time.Minute)   // a bound against a hang: PublishTimeout is an hour
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-hang:
		t.Fatal("Close did not return: it did not stop the call in flight")
	}
	select {
	case errs := <-done:
		if len(errs) != len(msgs) {
			t.Fatalf("%d outcomes for %d messages", len(errs), len(msgs))
		}
		for i, err := range errs {
			if err == nil || !pub.Retriable(err) {
				t.Errorf("message %d: got %v, want a retriable error", i, err)
			}
		}
	case <-hang:
		t.Fatal("PublishEach did not return after Close")
	}
	if errs := pub.PublishEach(context.Background(), "inflight", msgs[:1]); !errors.Is(errs[0], nats.ErrPublisherClosed) {
		t.Errorf("after Close: %v, want ErrPublisherClosed", errs[0])
	}
}

// TestDeduplicationByMsgID: the same event published twice within the duplicate window (a
// relay resend after a lost acknowledgement) is stored once; both publishes are acknowledged.
func TestDeduplicationByMsgID(t *testing.T) {
	srv := natsserver.Start(t, natsserver.Options{})
	pub := newPublisher(t, nats.Config{URLs: []string{srv.URL()}})
	msg := keyed("a", 0)
	for attempt := range 2 {
		resend := message.NewMessage(msg.UUID, msg.Payload) // the relay rebuilds it from the row
		resend.Metadata.Set(nats.DefaultKeyMetadata, msg.Metadata.Get(nats.DefaultKeyMetadata))
		if errs := pub.PublishEach(context.Background(), "dedup", []*message.Message{resend}); errs[0] != nil {
			t.Fatalf("publish %d: %v", attempt, errs[0])
		}
	}
	if got := readStream(t, srv.URL(), "dedup"); len(got) != 1 || got[0].uuid != msg.UUID {
		t.Fatalf("stored %+v, want the event once", got)
	}
}

// TestBrokerRestart: the server stops and starts again (same port and store) while a publisher
// sends keyed batches, retrying failed messages the way the relay does (a key's failed message
// and everything after it again): publishing resumes after the restart, nothing is lost,
// nothing is stored twice (Nats-Msg-Id), and every key stays in order.
func TestBrokerRestart(t *testing.T) {
	srv := natsserver.Start(t, natsserver.Options{})
	pub := newPublisher(t, nats.Config{URLs: []string{srv.URL()}, PublishTimeout: 2 * time.Second, ReconnectWait: 100 * time.Millisecond})
	const keys, perKey = 20, 30
	pendingByKey := map[string][]*message.Message{}
	want := map[string]int{}
	for k := range keys {
		key := "k" + strconv.Itoa(k)
		want[key] = perKey
		for seq := range perKey {
			pendingByKey[key] = append(pendingByKey[key], keyed(key, seq))
		}
	}
	restarted, failures := false, 0
	deadline := time.Now().Add(3 * time.Minute) // a bound against a hang
	for round := 0; len(pendingByKey) > 0; round++ {
		if time.Now().After(deadline) {
			t.Fatalf("messages still pending after 3 minutes: %d keys", len(pendingByKey))
		}
		switch round {
		case 3:
			srv.Stop() // rounds 3 and 4 run against a stopped server
		case 5:
			srv.Restart()
			restarted = true
		}
		var batch []*message.Message
		for _, msgs := range pendingByKey {
			batch = append(batch, msgs[:min(3, len(msgs))]...) // three per key per round
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs := pub.PublishEach(ctx, "restart", batch)
		cancel()
		acked := map[string]int{}
		failedKey := map[string]bool{}
		for i, msg := range batch {
			key := msg.Metadata.Get(nats.DefaultKeyMetadata)
			if errs[i] != nil {
				failures++
				if !pub.Retriable(errs[i]) {
					t.Fatalf("permanent error during a restart: %v", errs[i])
				}
				failedKey[key] = true
				continue
			}
			if failedKey[key] {
				t.Fatalf("key %s: acknowledged after a failure in the same call", key)
			}
			acked[key]++
		}
		for key, n := range acked {
			pendingByKey[key] = pendingByKey[key][n:]
			if len(pendingByKey[key]) == 0 {
				delete(pendingByKey, key)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !restarted {
		t.Fatal("the server was not restarted")
	}
	t.Logf("%d failed publishes during the restart, all retried", failures)
	checkPerKeyOrder(t, readStream(t, srv.URL(), "restart"), want)
}

// TestPublishEachNilMessagesFailWithoutPanic: nil messages share the key "", so the second one
// is held back behind the first one's failure; each gets an error naming the bad input (the
// first ErrInvalidMessage, the second ErrEarlierMessageFailed), the keyed message is stored.
func TestPublishEachNilMessagesFailWithoutPanic(t *testing.T) {
	srv := natsserver.Start(t, natsserver.Options{})
	pub := newPublisher(t, nats.Config{URLs: []string{srv.URL()}})
	errs := pub.PublishEach(context.Background(), "nilmessages", []*message.Message{nil, keyed("a", 0), nil})
	if len(errs) != 3 || !errors.Is(errs[0], nats.ErrInvalidMessage) || errs[1] != nil ||
		!errors.Is(errs[2], nats.ErrEarlierMessageFailed) {
		t.Fatalf("errs = %v, want [ErrInvalidMessage, nil, ErrEarlierMessageFailed]", errs)
	}
}
