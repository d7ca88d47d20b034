package faultinject

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// KafkaCluster is a dedicated three-node Kafka (scripts/services/kafka-cluster.sh: replication
// factor 3, min.insync.replicas 2, the transaction log likewise); a broker restart kills one
// node and starts it again (Broker.RestartOne).
const KafkaCluster = "kafka-cluster"

// The three nodes of the dedicated Kafka cluster listen on DefaultKafkaClusterPort and the two
// ports after it, their controllers on DefaultKafkaClusterControllerPort and the two after it.
const (
	DefaultKafkaClusterPort           = 29192
	DefaultKafkaClusterControllerPort = 29292
)

// kafkaClusterNodes is the number of nodes of a KafkaCluster.
const kafkaClusterNodes = 3

// Addrs are the bootstrap addresses of a Kafka client: every node of a KafkaCluster, or Addr.
func (b Broker) Addrs() []string {
	b.setDefaults()
	if b.Kind != KafkaCluster {
		return []string{b.Addr()}
	}
	addrs := make([]string, kafkaClusterNodes)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", b.KafkaClusterPort+i)
	}
	return addrs
}

// RestartOne is the nth broker restart of a run: Restart, or for a KafkaCluster a SIGKILL of
// node nth%3+1 (the restarts take the nodes in turn: the partitions it leads and the
// transaction coordinators it hosts move to the others), downtime, and its start, which returns
// once every partition is fully replicated again, so that the next node killed cannot take the
// last in-sync replica with it. It returns the node restarted, 0 for Restart.
func (b Broker) RestartOne(ctx context.Context, nth int, downtime time.Duration) (int, error) {
	if b.Kind != KafkaCluster {
		return 0, b.Restart(ctx, downtime)
	}
	node := nth%kafkaClusterNodes + 1
	if err := b.script(ctx, "kill-kafka-cluster-broker", strconv.Itoa(node)); err != nil {
		return node, err
	}
	select {
	case <-time.After(downtime):
	case <-ctx.Done():
		return node, ctx.Err()
	}
	return node, b.script(ctx, "start-kafka-cluster-broker", strconv.Itoa(node))
}

// cliBroker is the relays' broker setting for the broker: kafka for a KafkaCluster.
func (b Broker) cliBroker() string {
	if b.Kind == KafkaCluster {
		return Kafka
	}
	return b.Kind
}
