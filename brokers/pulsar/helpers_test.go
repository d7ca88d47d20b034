package pulsar_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// newTestPublisher returns a Publisher on the test broker, closed with the test.
func newTestPublisher(t testing.TB, mutate func(*pulsar.PublisherConfig)) *pulsar.Publisher {
	t.Helper()
	cfg := pulsar.PublisherConfig{Config: pulsar.Config{URL: testsupport.PulsarURL(t)}}
	if mutate != nil {
		mutate(&cfg)
	}
	pub, err := pulsar.NewPublisher(cfg, testLogger())
	if err != nil {
		t.Fatalf("new publisher: %v", err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// newTestSubscriber returns a Subscriber on the test broker, closed with the test.
func newTestSubscriber(t testing.TB, mutate func(*pulsar.SubscriberConfig)) *pulsar.Subscriber {
	t.Helper()
	cfg := pulsar.SubscriberConfig{
		Config:              pulsar.Config{URL: testsupport.PulsarURL(t)},
		SubscriptionName:    "test",
		NackRedeliveryDelay: 100 * time.Millisecond,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	sub, err := pulsar.NewSubscriber(cfg, testLogger())
	if err != nil {
		t.Fatalf("new subscriber: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// receive reads n messages from ch, acking each, or fails the test when ctx ends first.
func receive(ctx context.Context, t *testing.T, ch <-chan *message.Message, n int) []*message.Message {
	t.Helper()
	var got []*message.Message
	for len(got) < n {
		select {
		case msg, ok := <-ch:
			if !ok {
				t.Fatalf("channel closed after %d of %d messages", len(got), n)
			}
			got = append(got, msg)
			msg.Ack()
		case <-ctx.Done():
			t.Fatalf("received %d of %d messages: %v", len(got), n, ctx.Err())
		}
	}
	return got
}

// adminPost calls the Pulsar admin REST API.
func adminPost(t *testing.T, path string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, testsupport.PulsarHTTPURL()+path, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %s %s", path, resp.Status, body)
	}
}

// topicAdminPath turns persistent://t/n/x into /admin/v2/persistent/t/n/x.
func topicAdminPath(fullTopic string) string {
	scheme, rest, _ := strings.Cut(fullTopic, "://")
	return fmt.Sprintf("/admin/v2/%s/%s", scheme, rest)
}
