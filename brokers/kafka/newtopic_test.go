package kafka_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outboxkit/outboxkit/brokers/kafka"
)

// Right after a topic is auto-created, its partition leader may answer produce requests with
// UNKNOWN_TOPIC_OR_PARTITION for a while. franz-go fails the records after 4 such answers by
// default, which a CI run hit on a Kafka started a minute before ("20 of 20 messages ... were
// not acknowledged: UNKNOWN_TOPIC_OR_PARTITION"). The publisher tries ProducerRetries times: here
// the broker (kfake, controlled) refuses the first 5 produce requests, and the call succeeds.
func TestPublishWaitsOutANewTopicsUnknownPartition(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "fresh"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	const refusals = 5 // one more than franz-go's default allows
	refused := 0
	cluster.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if refused == refusals {
			return nil, nil, false
		}
		refused++
		cluster.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.BaseOffset = rp.Partition, kerr.UnknownTopicOrPartition.Code, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	pub, err := kafka.NewPublisher(kafka.Config{Brokers: cluster.ListenAddrs(), RetryBackoff: 10e6}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Publish("fresh", sequenced(20, "K")...); err != nil {
		t.Fatalf("publish after %d UNKNOWN_TOPIC_OR_PARTITION answers: %v, want delivered", refused, err)
	}
	if refused != refusals {
		t.Fatalf("the broker refused %d produce requests, want %d", refused, refusals)
	}
	if got := consume(t, cluster.ListenAddrs(), "fresh", 20, 0); len(got) != 20 {
		t.Fatalf("the topic holds %d messages, want 20", len(got))
	}
}
