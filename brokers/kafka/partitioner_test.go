package kafka_test

import (
	"testing"

	"github.com/IBM/sarama"

	"github.com/outboxkit/outboxkit/brokers/kafka"
)

// Java's Utils.murmur2 results from Kafka's own UtilsTest: the murmur2 partitioner must put each
// key where the Java client does, toPositive(murmur2(key)) % partitions.
func TestMurmur2PartitionerMatchesJavaClient(t *testing.T) {
	javaMurmur2 := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	}
	p := kafka.NewMurmur2Partitioner("t")
	for key, h := range javaMurmur2 {
		for _, n := range []int32{1, 3, 7, 12, 100, 1009} {
			want := (h & 0x7fffffff) % n
			got, err := p.Partition(&sarama.ProducerMessage{Key: sarama.StringEncoder(key)}, n)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("key %q, %d partitions: got %d, want %d (Java)", key, n, got, want)
			}
		}
	}
	if !p.RequiresConsistency() {
		t.Error("a key partitioner must require consistency")
	}
	// Without a key, any valid partition.
	got, err := p.Partition(&sarama.ProducerMessage{}, 5)
	if err != nil || got < 0 || got >= 5 {
		t.Errorf("keyless message: partition %d, err %v", got, err)
	}
}
