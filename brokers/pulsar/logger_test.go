package pulsar_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

func TestClientLoggerLevelsAndFields(t *testing.T) {
	capture := watermill.NewCaptureLogger()
	logger := pulsar.NewClientLogger(capture).SubLogger(map[string]any{"topic": "orders"})
	boom := errors.New("boom")

	logger.Debugf("debug %d", 1)
	logger.WithField("producer", "p1").Info("created")
	logger.Warn("slow")
	logger.WithError(boom).Errorf("failed %s", "send")

	want := []watermill.CapturedMessage{
		{Level: watermill.TraceLogLevel, Msg: "debug 1", Fields: watermill.LogFields{"topic": "orders"}},
		{Level: watermill.DebugLogLevel, Msg: "created", Fields: watermill.LogFields{"topic": "orders", "producer": "p1"}},
		{Level: watermill.InfoLogLevel, Msg: "slow", Fields: watermill.LogFields{"topic": "orders", "pulsar_level": "warn"}},
		{Level: watermill.ErrorLogLevel, Msg: "failed send", Err: boom, Fields: watermill.LogFields{"topic": "orders"}},
	}
	for _, w := range want {
		if !capture.Has(w) {
			t.Errorf("not captured: %+v; captured: %+v", w, capture.Captured())
		}
	}
}

// TestClientLogsGoToWatermill runs a real client with a token: its lifecycle logs reach the
// Watermill logger (not stderr), and none of them carries the token. The test broker has
// authentication off, so it ignores the token.
func TestClientLogsGoToWatermill(t *testing.T) {
	url := testsupport.PulsarURL(t)
	capture := watermill.NewCaptureLogger()
	pub, err := pulsar.NewPublisher(pulsar.PublisherConfig{
		Config: pulsar.Config{URL: url, AuthToken: secretToken},
	}, capture)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(testsupport.UniqueName("logs"), message.NewMessage(watermill.NewUUID(), []byte("x"))); err != nil {
		t.Fatal(err)
	}
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	captured := capture.Captured()
	fromClient := 0
	for _, m := range captured[watermill.DebugLogLevel] {
		if m.Fields["component"] == nil { // the package's own logs carry component
			fromClient++
		}
	}
	if fromClient == 0 {
		t.Fatalf("no pulsar-client-go lifecycle logs captured at Debug: %+v", captured)
	}
	for level, msgs := range captured {
		for _, m := range msgs {
			if strings.Contains(fmt.Sprint(m.Msg, m.Fields, m.Err), secretToken) {
				t.Errorf("level %d log leaks the token: %+v", level, m)
			}
		}
	}
}
