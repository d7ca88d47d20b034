package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// threeBrokerKfake starts an in-process Kafka of three brokers (kfake honours replication
// factors) and a publisher on it.
func threeBrokerKfake(t *testing.T) (*Publisher, *kadm.Client) {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	pub, err := NewPublisher(Config{Brokers: cluster.ListenAddrs()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	client, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return pub, kadm.NewClient(client)
}

// TestCheckpointTopicCreatedReplicated: on a cluster of three brokers, OpenUnit creates the
// checkpoint topic with replication factor 3 and min.insync.replicas 2.
func TestCheckpointTopicCreatedReplicated(t *testing.T) {
	pub, adm := threeBrokerKfake(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pub.OpenUnit(ctx, "unit-a", "checkpoints", 0); err != nil {
		t.Fatalf("OpenUnit: %v", err)
	}
	defer pub.CloseUnit("unit-a")
	topics, err := adm.ListTopics(ctx, "checkpoints")
	if err != nil {
		t.Fatal(err)
	}
	for _, pd := range topics["checkpoints"].Partitions {
		if len(pd.Replicas) != CheckpointReplicationFactor {
			t.Fatalf("partition %d has replicas %v, want %d", pd.Partition, pd.Replicas, CheckpointReplicationFactor)
		}
	}
	configs, err := checkpointTopicConfigs(ctx, adm, "checkpoints")
	if err != nil {
		t.Fatal(err)
	}
	if got := configs["min.insync.replicas"]; got != "2" {
		t.Fatalf("min.insync.replicas = %q, want 2", got)
	}
}

// TestCheckpointTopicNotDurableRefused: OpenUnit refuses an existing checkpoint topic that
// could lose a committed checkpoint, naming the topic, its replication factor and the broker
// count: one replica on three brokers, or unclean leader election.
func TestCheckpointTopicNotDurableRefused(t *testing.T) {
	pub, adm := threeBrokerKfake(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	compact, unclean := "compact", "true"
	if _, err := adm.CreateTopic(ctx, 4, 1, map[string]*string{"cleanup.policy": &compact}, "single-replica"); err != nil {
		t.Fatal(err)
	}
	_, err := pub.OpenUnit(ctx, "unit-a", "single-replica", 0)
	if !errors.Is(err, ErrCheckpointTopicNotDurable) {
		t.Fatalf("OpenUnit on a topic of replication factor 1: %v, want ErrCheckpointTopicNotDurable", err)
	}
	for _, want := range []string{`"single-replica"`, "replication factor 1", "cluster of 3 brokers"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
	_, err = adm.CreateTopic(ctx, 4, 3, map[string]*string{"cleanup.policy": &compact, "unclean.leader.election.enable": &unclean}, "unclean")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.OpenUnit(ctx, "unit-b", "unclean", 0); !errors.Is(err, ErrCheckpointTopicNotDurable) ||
		!strings.Contains(err.Error(), "unclean.leader.election.enable=true") {
		t.Fatalf("OpenUnit on a topic with unclean leader election: %v, want ErrCheckpointTopicNotDurable naming it", err)
	}
}
