package brokerconfig_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/brokers/cloudevents"
	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/outbox"
)

func TestFormatErrorsNameTheValue(t *testing.T) {
	const kfake = "broker: kfake\n"
	for name, tc := range map[string]struct {
		yaml string
		env  map[string]string
		want string
	}{
		"unknown format":       {kfake + "format: xml\n", nil, `format: unknown value "xml" (allowed: watermill, cloudevents)`},
		"unknown format (env)": {kfake, map[string]string{"OUTBOXKIT_FORMAT": "protobuf"}, `format: unknown value "protobuf"`},
		"cloudevents without source": {kfake + "format: cloudevents\n", nil,
			"cloudevents.source: missing, required with format cloudevents"},
		"cloudevents with an empty source": {kfake + "format: cloudevents\ncloudevents:\n  source: ''\n", nil,
			"cloudevents.source: missing"},
		"source not a URI-reference": {kfake + "format: cloudevents\ncloudevents:\n  source: 'billing service'\n", nil,
			`cloudevents.source: "billing service" is not a URI-reference: character ' ' at offset 7`},
		"source not a URI-reference (env)": {kfake + "format: cloudevents\n", map[string]string{"OUTBOXKIT_CLOUDEVENTS_SOURCE": "/a%zz"},
			`cloudevents.source: "/a%zz" is not a URI-reference`},
		"unknown cloudevents key": {kfake + "format: cloudevents\ncloudevents:\n  sourse: /x\n", nil, "field sourse not found"},
		"pulsar too": {"broker: pulsar\npulsar:\n  url: pulsar://h:6650\nformat: cloudevent\n", nil,
			`format: unknown value "cloudevent"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := brokerconfig.Parse([]byte(tc.yaml), envMap(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestFormatDefaultsAndOverrides(t *testing.T) {
	cfg, err := brokerconfig.Parse([]byte("broker: kfake\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Format != brokerconfig.FormatWatermill {
		t.Errorf("default format %q, want %q", cfg.Format, brokerconfig.FormatWatermill)
	}
	// A source without format cloudevents is not used, so not checked.
	if _, err := brokerconfig.Parse([]byte("broker: kfake\ncloudevents:\n  source: 'not used'\n"), nil); err != nil {
		t.Errorf("unused cloudevents section: %v", err)
	}
	cfg, err = brokerconfig.Parse([]byte("broker: kfake\nformat: watermill\ncloudevents:\n  source: /file\n"), envMap(map[string]string{
		"OUTBOXKIT_FORMAT": " CloudEvents ", "OUTBOXKIT_CLOUDEVENTS_SOURCE": "https://example.com/env",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Format != brokerconfig.FormatCloudEvents || cfg.CloudEvents.Source != "https://example.com/env" {
		t.Errorf("environment not applied: format %q source %q", cfg.Format, cfg.CloudEvents.Source)
	}
	if s := cfg.String(); !strings.Contains(s, "format=cloudevents") || !strings.Contains(s, "source=https://example.com/env") {
		t.Errorf("String() = %s, want the format and the source", s)
	}
}

// With format cloudevents, Build wraps the broker's publisher; the forwarder still finds
// PublishEach, and a consumer (here the Watermill subscriber on kfake) sees the ce_ attributes
// beside the outbox metadata.
func TestBuildCloudEventsOnKFake(t *testing.T) {
	b := buildCloudEventsOnKFake(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, ok := b.Publisher().(*kafka.Publisher); ok {
		t.Fatal("the publisher is the bare kafka.Publisher: format cloudevents ignored")
	}
	op, ok := b.Publisher().(interface {
		PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error
	})
	if !ok {
		t.Fatal("the CloudEvents publisher lost PublishEach")
	}
	e, err := outbox.NewJSONEvent("ce-kfake", "order", "o-1", "OrderPlaced", map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	e.ID = [16]byte{1, 2, 3}
	e.CreatedAt = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	if errs := op.PublishEach(ctx, "ce-kfake", []*message.Message{e.ToMessage()}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	sub, err := b.NewSubscriber("ce-kfake-group")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := sub.Subscribe(ctx, "ce-kfake")
	if err != nil {
		t.Fatal(err)
	}
	var got *message.Message
	select {
	case got = <-msgs:
		got.Ack()
	case <-ctx.Done():
		t.Fatal("no message within 60s")
	}
	want := map[string]string{
		cloudevents.AttrID: e.ID.String(), cloudevents.AttrType: "OrderPlaced", cloudevents.AttrSource: "/tests",
		cloudevents.AttrSubject: "o-1", cloudevents.AttrTime: "2026-12-01T08:00:00Z", cloudevents.AttrSpecVersion: "1.0",
		"content-type": "application/json", outbox.MetadataEventID: e.ID.String(), outbox.MetadataAggregateType: "order",
	}
	for k, v := range want {
		if got.Metadata.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, got.Metadata.Get(k), v)
		}
	}
	if string(got.Payload) != `{"n":1}` {
		t.Errorf("payload %s", got.Payload)
	}
}

// Build with format cloudevents validates like Parse.
func TestBuildRefusesCloudEventsWithoutSource(t *testing.T) {
	_, err := brokerconfig.Build(context.Background(), brokerconfig.Config{Broker: "kfake", Format: "cloudevents"}, watermill.NopLogger{})
	if err == nil || !strings.Contains(err.Error(), "cloudevents.source: missing") {
		t.Errorf("Build: %v", err)
	}
}

// buildCloudEventsOnKFake builds the brokers of a kfake configuration with format cloudevents,
// closed with the test.
func buildCloudEventsOnKFake(t *testing.T) *brokerconfig.Brokers {
	t.Helper()
	cfg, err := brokerconfig.Parse([]byte("broker: kfake\nformat: cloudevents\ncloudevents:\n  source: /tests\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := brokerconfig.Build(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}
