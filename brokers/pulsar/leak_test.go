package pulsar_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestNoGoroutineLeak subscribes, cancels one subscription's context mid-delivery, keeps
// another running, publishes, then closes everything: the goroutine count must come back
// to where it was.
func TestNoGoroutineLeak(t *testing.T) {
	url := testsupport.PulsarURL(t)
	before := runtime.NumGoroutine()

	// The producers run without pulsar-client-go's send-timeout goroutine (it noticed a
	// close only at its next tick, up to SendTimeout later: failTimeoutMessages); the
	// short SendTimeout keeps the wait below short should that ever change.
	pub, err := pulsar.NewPublisher(pulsar.PublisherConfig{
		Config: pulsar.Config{URL: url}, SendTimeout: 2 * time.Second,
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := pulsar.NewSubscriber(pulsar.SubscriberConfig{
		Config: pulsar.Config{URL: url}, SubscriptionName: "leak",
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	topic := testsupport.UniqueName("leak")
	if err := pub.Publish(topic, message.NewMessage(watermill.NewUUID(), []byte("x"))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancelled, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	<-cancelled // held, neither acked nor nacked
	cancel()
	for range cancelled { // the channel closes after the cancel
	}
	if _, err := sub.Subscribe(context.Background(), testsupport.UniqueName("leak2")); err != nil {
		t.Fatal(err)
	}
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}

	// pulsar-client-go's goroutines end shortly after Close returns; wait for them instead
	// of asserting at once.
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after Close:\n%s",
				before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
