package faultinject

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/outbox"
)

// clusterRun is the size of the cluster runs: smaller than the single-broker runs (three JVMs
// share the machine) but long enough for three broker restarts during the writes.
func clusterRun(c *Config) {
	c.Events, c.Keys, c.Rate, c.Kills, c.Pauses, c.BrokerRestarts = 1500, 100, 100, 4, 2, 3
}

// TestFaultInjectionKafkaCluster is the fault run against a dedicated three-node Kafka cluster
// (replication factor 3, min.insync.replicas 2, transaction log likewise): 1,500 events over
// 100 keys (10 % of the transactions rolled back), 3 relays SIGKILLed 4 times and SIGSTOPped
// twice, their database connections cut once, and each of the three nodes SIGKILLed and started
// again in turn during the writes, so partition leaders and transaction coordinators move. Once
// at least once and once exactly once with the same seed: no loss, no phantom, per-key order, and
// exactly once no duplicate in the read_committed consumer.
func TestFaultInjectionKafkaCluster(t *testing.T) {
	seed := rand.Uint64()
	var atLeastOnce Result
	t.Run("at_least_once", func(t *testing.T) {
		atLeastOnce = runFaultsWith(t, KafkaCluster, outbox.Postgres, true, "at_least_once", seed, clusterRun)
		if atLeastOnce.BrokerRestarts != 3 {
			t.Fatalf("%d broker restarts, want 3", atLeastOnce.BrokerRestarts)
		}
	})
	t.Run("exactly_once", func(t *testing.T) {
		res := runFaultsWith(t, KafkaCluster, outbox.Postgres, true, "exactly_once", seed, clusterRun)
		if res.Duplicates != 0 {
			t.Fatalf("a read_committed consumer saw %d duplicates under exactly-once delivery", res.Duplicates)
		}
		if res.BrokerRestarts != 3 {
			t.Fatalf("%d broker restarts, want 3", res.BrokerRestarts)
		}
		t.Logf("duplicates: %d at least once, %d exactly once (seed %d)", atLeastOnce.Duplicates, res.Duplicates, seed)
	})
}

// TestKafkaClusterCheckpointTopic: on the three-node cluster, the checkpoint topic a relay
// creates has replication factor 3 and min.insync.replicas 2, and an existing checkpoint topic
// of replication factor 1 is refused, naming the topic, its replication factor and the broker
// count.
func TestKafkaClusterCheckpointTopic(t *testing.T) {
	b := dedicatedBroker(t, KafkaCluster)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pub, err := kafka.NewPublisher(kafka.Config{Brokers: b.Addrs()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	client, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	adm := kadm.NewClient(client)
	suffix := time.Now().UnixNano()
	fresh, single := fmt.Sprintf("fault-checkpoints-%d", suffix), fmt.Sprintf("fault-checkpoints-rf1-%d", suffix)
	defer func() { _, _ = adm.DeleteTopics(context.Background(), fresh, single) }()

	if _, err := pub.OpenUnit(ctx, fresh+"/u00", fresh, 0); err != nil {
		t.Fatalf("OpenUnit on a new checkpoint topic: %v", err)
	}
	pub.CloseUnit(fresh + "/u00")
	topics, err := adm.ListTopics(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	for _, pd := range topics[fresh].Partitions {
		if len(pd.Replicas) != 3 {
			t.Fatalf("checkpoint topic partition %d has replicas %v, want 3", pd.Partition, pd.Replicas)
		}
	}
	configs, err := adm.DescribeTopicConfigs(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := configs.On(fresh, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key == "min.insync.replicas" && (c.Value == nil || *c.Value != "2") {
			t.Fatalf("checkpoint topic min.insync.replicas = %v, want 2", c.Value)
		}
	}

	compact := "compact"
	if _, err := adm.CreateTopic(ctx, 4, 1, map[string]*string{"cleanup.policy": &compact}, single); err != nil {
		t.Fatal(err)
	}
	_, err = pub.OpenUnit(ctx, single+"/u00", single, 0)
	if !errors.Is(err, kafka.ErrCheckpointTopicNotDurable) {
		t.Fatalf("OpenUnit on a checkpoint topic of replication factor 1: %v, want kafka.ErrCheckpointTopicNotDurable", err)
	}
	for _, want := range []string{single, "replication factor 1", "cluster of 3 brokers"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	t.Logf("refused: %v", err)
}
