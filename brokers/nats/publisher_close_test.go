package nats_test

import (
	"sync"
	"testing"

	"github.com/outboxkit/outboxkit/brokers/nats"
	"github.com/outboxkit/outboxkit/internal/testsupport/natsserver"
)

// Concurrent Close calls neither panic nor fail.
func TestConcurrentClose(t *testing.T) {
	srv := natsserver.Start(t, natsserver.Options{})
	pub, err := nats.NewPublisher(nats.Config{URLs: []string{srv.URL()}}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := pub.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	wg.Wait()
}
