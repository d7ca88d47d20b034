package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxkit/outboxkit/brokers/nats"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// Two installations on one NATS server (the NATS of scripts/services.sh), one with
// nats.partitions 0 and one with 4, sharing one dead-letter topic, as every installation shares
// the default one: each `outboxkit relay` dead-letters its oversized event into the same
// stream. The dead-letter topic's stream holds <topic>.* whatever the partitions, so neither
// finds the other's stream with other subjects (ErrStreamMismatch, which stopped the second
// relay at start).
func TestRelayNATSInstallationsShareTheDeadLetterTopic(t *testing.T) {
	url := testsupport.NATSURL(t)
	dlq := testsupport.UniqueName("cli.nshared") + ".dead"
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = js.DeleteStream(context.Background(), nats.StreamName(dlq))
		nc.Close()
	})
	for _, partitions := range []int{0, 4} {
		relayDeadLettersOversizedEvent(t, oversizedCase{
			name:            fmt.Sprintf("nshared%d", partitions),
			broker:          fmt.Sprintf("broker: nats\nnats:\n  urls: [%s]\n  partitions: %d\n", url, partitions),
			payload:         1100 << 10,
			maxAttempt:      1,
			deadLetterTopic: dlq,
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound against a hang
	defer cancel()
	stream, err := js.Stream(ctx, nats.StreamName(dlq))
	if err != nil {
		t.Fatalf("dead-letter stream of %s: %v", dlq, err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 2 || len(info.Config.Subjects) != 1 || info.Config.Subjects[0] != dlq+".*" {
		t.Errorf("dead-letter stream: %d messages on subjects %v, want the 2 dead letters on %s.*", info.State.Msgs, info.Config.Subjects, dlq)
	}
}
