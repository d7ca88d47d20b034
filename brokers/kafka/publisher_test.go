package kafka_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// The forwarder's optional interface, structurally (brokers/kafka does not import forwarder):
// a change of either signature breaks this line.
var _ interface {
	PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error
} = (*kafka.Publisher)(nil)

const seqKey = "seq"

// sequenced returns n messages over keys (round robin), each with its per-key sequence number
// in the "seq" metadata entry.
func sequenced(n int, keys ...string) []*message.Message {
	msgs := make([]*message.Message, n)
	next := map[string]int{}
	for i := range msgs {
		k := keys[i%len(keys)]
		msgs[i] = keyed(k, fmt.Appendf(nil, "%s-%d", k, next[k]))
		msgs[i].Metadata.Set(seqKey, strconv.Itoa(next[k]))
		next[k]++
	}
	return msgs
}

// createTopic creates topic with the given number of partitions.
func createTopic(t testing.TB, brokers []string, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// consume reads topic from the start with a plain franz-go consumer until it has want records,
// then keeps reading for grace to catch any record that should not be there.
func consume(t testing.TB, brokers []string, topic string, want int, grace time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	deadline := time.Now().Add(60 * time.Second)
	var graceEnd time.Time
	for {
		now := time.Now()
		if len(got) >= want && graceEnd.IsZero() {
			graceEnd = now.Add(grace)
		}
		end := deadline
		if !graceEnd.IsZero() {
			end = graceEnd
		}
		if now.After(end) {
			break
		}
		ctx, cancel := context.WithDeadline(context.Background(), end)
		fetches := cl.PollFetches(ctx)
		cancel()
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				t.Fatalf("consume %s: %v", topic, fe.Err)
			}
		}
		got = append(got, fetches.Records()...)
	}
	if len(got) < want {
		t.Fatalf("consumed %d records of %s, want %d", len(got), topic, want)
	}
	return got
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// checkTopic verifies that the records are exactly the messages of want (by UUID, no extra, no
// duplicate), that each key's records are in sequence order on one partition, the partition
// murmur2 picks for the key, and that the wire format is watermill-kafka's.
func checkTopic(t *testing.T, records []*kgo.Record, want []*message.Message, partitions int) {
	t.Helper()
	byUUID := map[string]*message.Message{}
	for _, m := range want {
		byUUID[m.UUID] = m
	}
	seen := map[string]bool{}
	lastSeq := map[string]int{}
	partOf := map[string]int32{}
	murmur2 := kgo.StickyKeyPartitioner(nil).ForTopic("")
	for _, r := range records {
		id := header(r, wkafka.UUIDHeaderKey)
		m, ok := byUUID[id]
		if !ok {
			t.Errorf("record %q (key %q, payload %q) should not be in the topic", id, r.Key, r.Value)
			continue
		}
		if seen[id] {
			t.Errorf("record %s twice", id)
		}
		seen[id] = true
		key := string(r.Key)
		if key != m.Metadata.Get(kafka.DefaultKeyMetadata) || !bytes.Equal(r.Value, m.Payload) {
			t.Errorf("record %s: key %q payload %q, want %q %q", id, key, r.Value, m.Metadata.Get(kafka.DefaultKeyMetadata), m.Payload)
		}
		for k, v := range m.Metadata {
			if header(r, k) != v {
				t.Errorf("record %s: header %q = %q, want %q", id, k, header(r, k), v)
			}
		}
		seq, _ := strconv.Atoi(header(r, seqKey))
		if last, ok := lastSeq[key]; ok && seq <= last {
			t.Errorf("key %q: seq %d after %d, out of order", key, seq, last)
		}
		lastSeq[key] = seq
		if p, ok := partOf[key]; ok && p != r.Partition {
			t.Errorf("key %q on partitions %d and %d", key, p, r.Partition)
		}
		partOf[key] = r.Partition
		if wantP := murmur2.Partition(&kgo.Record{Key: r.Key}, partitions); int(r.Partition) != wantP {
			t.Errorf("key %q on partition %d, murmur2 says %d", key, r.Partition, wantP)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d of %d messages in the topic", len(seen), len(want))
	}
}

func newPublisher(t testing.TB, cfg kafka.Config) *kafka.Publisher {
	t.Helper()
	pub, err := kafka.NewPublisher(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// A batch with an oversized message of key K in the middle, against the real Kafka: the
// earlier K messages and every other key are delivered; the oversized one fails permanently
// and every later K message fails as held back, retriable, and none of them is in the topic.
func TestPublishEachOversizedMessageIsGapless(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	topic := testsupport.UniqueName("gapless")
	createTopic(t, brokers, topic, 3)
	pub := newPublisher(t, kafka.Config{Brokers: brokers})

	msgs := sequenced(40, "K", "A", "B", "C")
	big := make([]byte, 1100*1024)
	_, _ = rand.Read(big) // incompressible
	const bigAt = 17      // after K's seq 0..4 (indexes 0, 4, 8, 12, 16)
	oversized := keyed("K", big)
	oversized.Metadata.Set(seqKey, "4.5")
	msgs = append(msgs[:bigAt], append([]*message.Message{oversized}, msgs[bigAt:]...)...)

	errs := pub.PublishEach(context.Background(), topic, msgs)
	if len(errs) != len(msgs) {
		t.Fatalf("%d errors for %d messages", len(errs), len(msgs))
	}
	var delivered []*message.Message
	for i, m := range msgs {
		key := m.Metadata.Get(kafka.DefaultKeyMetadata)
		switch {
		case i == bigAt:
			if !errors.Is(errs[i], kerr.MessageTooLarge) || kafka.Retriable(errs[i]) {
				t.Errorf("oversized message: want a permanent MESSAGE_TOO_LARGE, got %v", errs[i])
			}
		case key == "K" && i > bigAt:
			if !errors.Is(errs[i], kafka.ErrEarlierMessageFailed) || !kafka.Retriable(errs[i]) ||
				!strings.Contains(errs[i].Error(), oversized.UUID) {
				t.Errorf("K message %d after the oversized one: want a retriable ErrEarlierMessageFailed naming %s, got %v",
					i, oversized.UUID, errs[i])
			}
		default:
			if errs[i] != nil {
				t.Errorf("message %d (key %s): %v", i, key, errs[i])
			}
			delivered = append(delivered, m)
		}
	}
	if len(delivered) != 40-5 { // K's 5 messages after the oversized one are held back
		t.Fatalf("%d messages delivered, want 35", len(delivered))
	}
	checkTopic(t, consume(t, brokers, topic, len(delivered), 2*time.Second), delivered, 3)

	// Publish reports the same as a *PublishError listing the failed messages.
	msgs2 := []*message.Message{keyed("K", []byte("a")), keyed("K", big), keyed("K", []byte("c")), keyed("Z", []byte("d"))}
	err := pub.Publish(topic, msgs2...)
	var pubErr *kafka.PublishError
	if !errors.As(err, &pubErr) || pubErr.Total != 4 || len(pubErr.Failed) != 2 ||
		pubErr.Failed[0].UUID != msgs2[1].UUID || pubErr.Failed[1].UUID != msgs2[2].UUID {
		t.Fatalf("want a PublishError listing the oversized message and the later K one, got %v", err)
	}
	if !errors.Is(err, kerr.MessageTooLarge) || kafka.Retriable(err) {
		t.Errorf("the PublishError unwraps to the first failure, got %v", err)
	}
}

// 1000 messages of one key in one call arrive in order, on the key's partition.
func TestPublishEachOneKeyInOrder(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	topic := testsupport.UniqueName("hotkey")
	createTopic(t, brokers, topic, 4)
	pub := newPublisher(t, kafka.Config{Brokers: brokers})
	msgs := sequenced(1000, "hot")
	for i, err := range pub.PublishEach(context.Background(), topic, msgs) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	records := consume(t, brokers, topic, len(msgs), time.Second)
	checkTopic(t, records, msgs, 4)
	for i, r := range records {
		if header(r, seqKey) != strconv.Itoa(i) {
			t.Fatalf("record %d has seq %s", i, header(r, seqKey))
		}
	}
}

// Many keys in one call, several calls at once (distinct keys per call): every key's messages
// are in order on the key's murmur2 partition.
func TestPublishEachOrderPerKeyManyKeys(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	topic := testsupport.UniqueName("manykeys")
	createTopic(t, brokers, topic, 8)
	pub := newPublisher(t, kafka.Config{Brokers: brokers})
	var all []*message.Message
	var calls [][]*message.Message
	for c := range 4 {
		var keys []string
		for k := range 50 {
			keys = append(keys, fmt.Sprintf("agg-%d-%d", c, k))
		}
		msgs := sequenced(1000, keys...)
		calls = append(calls, msgs)
		all = append(all, msgs...)
	}
	var wg sync.WaitGroup
	for _, msgs := range calls {
		wg.Go(func() {
			for i, err := range pub.PublishEach(context.Background(), topic, msgs) {
				if err != nil {
					t.Errorf("message %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	checkTopic(t, consume(t, brokers, topic, len(all), time.Second), all, 8)
}

// watermill-kafka's Subscriber (NewSubscriber) reads what the publisher writes: UUID, payload,
// metadata and key.
func TestSubscriberReadsPublishedMessages(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	topic := testsupport.UniqueName("compat")
	cfg := kafka.Config{Brokers: brokers}
	pub := newPublisher(t, cfg)
	msgs := sequenced(3, "order-1", "order-2")
	msgs[1].Metadata.Set("trace_id", "abc")
	if err := pub.Publish(topic, msgs...); err != nil {
		t.Fatal(err)
	}
	sub, err := kafka.NewSubscriber(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ch, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*message.Message{}
	for len(got) < len(msgs) {
		select {
		case m := <-ch:
			key, _ := wkafka.MessageKeyFromCtx(m.Context())
			if string(key) != m.Metadata.Get(kafka.DefaultKeyMetadata) {
				t.Errorf("message %s: key %q, metadata %q", m.UUID, key, m.Metadata.Get(kafka.DefaultKeyMetadata))
			}
			got[m.UUID] = m
			m.Ack()
		case <-ctx.Done():
			t.Fatalf("received %d of %d messages", len(got), len(msgs))
		}
	}
	for _, want := range msgs {
		m, ok := got[want.UUID]
		if !ok {
			t.Fatalf("message %s not received", want.UUID)
		}
		if !bytes.Equal(m.Payload, want.Payload) || !maps.Equal(m.Metadata, want.Metadata) {
			t.Errorf("message %s: %q %v, want %q %v", want.UUID, m.Payload, m.Metadata, want.Payload, want.Metadata)
		}
	}
}

// Close: calls in progress finish (their outcomes are real, not ErrClientClosed), later calls
// fail with ErrPublisherClosed, a second Close is a no-op. On kfake and the real Kafka.
func TestPublisherClose(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	for name, brokers := range map[string]func(testing.TB) []string{
		"kfake": func(testing.TB) []string { return cluster.ListenAddrs() },
		"kafka": testsupport.KafkaBrokers,
	} {
		t.Run(name, func(t *testing.T) {
			pub, err := kafka.NewPublisher(kafka.Config{Brokers: brokers(t)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			topic := testsupport.UniqueName("close")
			if err := pub.Publish(topic, keyed("a", []byte("x"))); err != nil {
				t.Fatal(err)
			}
			inFlight := sequenced(2000, "a", "b")
			var errs []error
			var wg sync.WaitGroup
			wg.Go(func() { errs = pub.PublishEach(context.Background(), topic, inFlight) })
			time.Sleep(time.Millisecond)
			if err := pub.Close(); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			// Either the call got in before Close (all acknowledged) or after (all refused).
			closed := errors.Is(errs[0], kafka.ErrPublisherClosed)
			for i, err := range errs {
				if closed && !errors.Is(err, kafka.ErrPublisherClosed) || !closed && err != nil {
					t.Fatalf("message %d of the call racing Close: %v (first: %v)", i, err, errs[0])
				}
			}
			if err := pub.Publish(topic, keyed("a", []byte("y"))); !errors.Is(err, kafka.ErrPublisherClosed) || !kafka.Retriable(err) {
				t.Errorf("Publish after Close: %v, want ErrPublisherClosed", err)
			}
			after := pub.PublishEach(context.Background(), topic, sequenced(3, "a"))
			if len(after) != 3 {
				t.Fatalf("%d errors for 3 messages", len(after))
			}
			for _, err := range after {
				if !errors.Is(err, kafka.ErrPublisherClosed) {
					t.Errorf("PublishEach after Close: %v, want ErrPublisherClosed", err)
				}
			}
			if err := pub.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

// Bad input, on kfake: an invalid message (a metadata key watermill reserves) fails
// permanently, its key's later messages are held back and not produced, other keys flow; a nil
// message fails alone; no topic, a cancelled context and an empty call are handled.
func TestPublishEachBadInput(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	pub := newPublisher(t, kafka.Config{Brokers: cluster.ListenAddrs()})

	msgs := sequenced(6, "K", "A") // K0 A0 K1 A1 K2 A2
	invalid := keyed("K", []byte("bad"))
	invalid.Metadata.Set(wkafka.UUIDHeaderKey, "forged")
	msgs = append(msgs[:2], append([]*message.Message{invalid, nil}, msgs[2:]...)...) // K0 A0 bad nil K1 A1 K2 A2
	errs := pub.PublishEach(context.Background(), "events", msgs)
	if len(errs) != len(msgs) {
		t.Fatalf("%d errors for %d messages", len(errs), len(msgs))
	}
	for i, want := range []struct {
		is        error
		retriable bool
	}{{nil, false}, {nil, false}, {kafka.ErrInvalidMessage, false}, {kafka.ErrInvalidMessage, false},
		{kafka.ErrEarlierMessageFailed, true}, {nil, false}, {kafka.ErrEarlierMessageFailed, true}, {nil, false}} {
		if want.is == nil && errs[i] != nil || want.is != nil && (!errors.Is(errs[i], want.is) || kafka.Retriable(errs[i]) != want.retriable) {
			t.Errorf("message %d: got %v, want %v (retriable %v)", i, errs[i], want.is, want.retriable)
		}
	}
	checkTopic(t, consume(t, cluster.ListenAddrs(), "events", 4, time.Second), []*message.Message{msgs[0], msgs[1], msgs[5], msgs[7]}, 2)

	if errs := pub.PublishEach(context.Background(), "events", nil); errs == nil || len(errs) != 0 {
		t.Errorf("empty call: %v", errs)
	}
	for _, err := range pub.PublishEach(context.Background(), "", sequenced(2, "a")) {
		if !errors.Is(err, kafka.ErrInvalidMessage) {
			t.Errorf("no topic: %v, want ErrInvalidMessage", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, err := range pub.PublishEach(ctx, "events", sequenced(3, "a", "b")) {
		if !errors.Is(err, context.Canceled) || !kafka.Retriable(err) {
			t.Errorf("cancelled context: %v, want a retriable context.Canceled", err)
		}
	}
	// A nil context is bad input that must not panic.
	for _, err := range pub.PublishEach(nil, "events", sequenced(1, "a")) { //nolint:staticcheck // SA1012 on purpose
		if err != nil {
			t.Errorf("nil context: %v", err)
		}
	}
}

// The broker refuses produce requests with INVALID_RECORD (kfake, controlled): either only the
// first request of the call (the first message is innocent, refused with its batch) or every
// request holding the first message (it is guilty). The publisher sends the key's messages again
// alone, in order, from the refused first one on, until one fails alone. Guilty: it is reported
// with the broker's error and every later message of the key is held back (gapless); the topic
// holds none of them, or, when a later request of the partition was already in flight and the
// broker took it (franz-go cannot fail a request it has sent), exactly as many as the publisher
// logged as reordered. Innocent: every message is acknowledged, its own outcome, and the topic's
// last 500 records are the call's messages in order (after the reordered ones, if any). Several
// runs: the in-flight case is timing.
func TestPublishEachBrokerFailureIsGapless(t *testing.T) {
	var reorderedRuns int
	for run := range 6 {
		guilty := run%2 == 1
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
		if err != nil {
			t.Fatal(err)
		}
		logs := watermill.NewCaptureLogger()
		pub, err := kafka.NewPublisher(kafka.Config{Brokers: cluster.ListenAddrs(), Compression: kafka.CompressionNone}, logs)
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish("events", keyed("warmup", []byte("x"))); err != nil {
			t.Fatal(err)
		}
		refused := 0 // records in the first refused request: the first ones of the call
		cluster.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			req := kreq.(*kmsg.ProduceRequest)
			if guilty {
				cluster.KeepControl()
				holds := false
				for _, rt := range req.Topics {
					for _, rp := range rt.Partitions {
						holds = holds || bytes.Contains(rp.Records, []byte("K-0")) // uncompressed
					}
				}
				if !holds {
					return nil, nil, false
				}
			}
			resp := req.ResponseKind().(*kmsg.ProduceResponse)
			for _, rt := range req.Topics {
				st := kmsg.NewProduceResponseTopic()
				st.Topic, st.TopicID = rt.Topic, rt.TopicID
				for _, rp := range rt.Partitions {
					var batch kmsg.RecordBatch
					if err := batch.ReadFrom(rp.Records); err == nil && refused == 0 {
						refused = int(batch.NumRecords)
					}
					sp := kmsg.NewProduceResponseTopicPartition()
					sp.Partition, sp.ErrorCode, sp.BaseOffset = rp.Partition, kerr.InvalidRecord.Code, -1
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil, true
		})
		msgs := sequenced(500, "K")
		errs := pub.PublishEach(context.Background(), "events", msgs)
		if guilty && (!errors.Is(errs[0], kerr.InvalidRecord) || kafka.Retriable(errs[0]) || !strings.Contains(errs[0].Error(), "alone")) {
			t.Fatalf("run %d, guilty first message: %v, want INVALID_RECORD also when sent alone", run, errs[0])
		}
		for i, err := range errs[1:] {
			if guilty && (!errors.Is(err, kafka.ErrEarlierMessageFailed) || !kafka.Retriable(err)) {
				t.Fatalf("run %d, message %d: %v, want ErrEarlierMessageFailed", run, i+1, err)
			}
		}
		if !guilty {
			for i, err := range errs {
				if err != nil {
					t.Fatalf("run %d, innocent message %d: %v, want it acknowledged when sent alone", run, i, err)
				}
			}
		}
		if refused == 0 {
			t.Fatalf("run %d: the refused request held no record", run)
		}
		logged := 0
		for _, m := range logs.Captured()[watermill.ErrorLogLevel] {
			if m.Msg == kafka.ReorderedLogMessage {
				if m.Fields["failed_uuid"] != msgs[0].UUID || m.Fields["key"] != "K" {
					t.Errorf("run %d: reordering logged with %v", run, m.Fields)
				}
				logged += m.Fields["reordered"].(int)
			}
		}
		want := logged
		if !guilty {
			want += len(msgs)
		}
		inTopic := consume(t, cluster.ListenAddrs(), "events", 1+want, 500*time.Millisecond)[1:]
		if len(inTopic) != want {
			t.Fatalf("run %d: %d messages of the call are in the topic, want %d (%d logged as reordered)", run, len(inTopic), want, logged)
		}
		if guilty {
			for _, r := range inTopic {
				seq, _ := strconv.Atoi(header(r, seqKey))
				if seq == 0 || seq < refused {
					t.Fatalf("run %d: message %d (refused request: %d records) is in the topic", run, seq, refused)
				}
			}
		} else {
			checkTopic(t, inTopic[logged:], msgs, 1)
		}
		if logged > 0 {
			reorderedRuns++
		}
		_ = pub.Close()
		cluster.Close()
	}
	t.Logf("%d of 6 runs had a later in-flight request acknowledged after the refused one", reorderedRuns)
}

// The publisher's size check refuses every record franz-go would refuse on its own, so that
// the refusal happens before anything is produced: around the limit, each message is either
// delivered or refused by the check, never by franz-go.
func TestSizeCheckCoversFranzGo(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	const limit = 10000
	pub := newPublisher(t, kafka.Config{Brokers: cluster.ListenAddrs(), MessageMaxBytes: limit, Compression: kafka.CompressionNone})
	var msgs []*message.Message
	for size := limit - 250; size <= limit; size++ {
		msgs = append(msgs, keyed(fmt.Sprintf("k%d", size), make([]byte, size)))
	}
	maxOK, minRefused := -1, limit+1
	for i, err := range pub.PublishEach(context.Background(), "events", msgs) {
		size := len(msgs[i].Payload)
		switch {
		case err == nil:
			maxOK = max(maxOK, size)
		case errors.Is(err, kerr.MessageTooLarge) && strings.Contains(err.Error(), "as a record batch, above message_max_bytes"):
			minRefused = min(minRefused, size)
		default:
			t.Errorf("payload of %d bytes: %v (not the publisher's check)", size, err)
		}
	}
	// Every key is distinct, so each message stands alone: delivered below a threshold,
	// refused from it on.
	if maxOK < 0 || minRefused > limit || maxOK+1 != minRefused {
		t.Errorf("largest delivered payload %d, smallest refused %d: want adjacent sizes around the limit", maxOK, minRefused)
	}
}
