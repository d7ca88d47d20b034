package kafka

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
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
	p := partitioner(PartitionerMurmur2).ForTopic("t")
	for key, h := range javaMurmur2 {
		for _, n := range []int32{1, 3, 7, 12, 100, 1009} {
			want := (h & 0x7fffffff) % n
			if got := p.Partition(&kgo.Record{Key: []byte(key)}, int(n)); got != int(want) {
				t.Errorf("key %q, %d partitions: got %d, want %d (Java)", key, n, got, want)
			}
		}
	}
	if !p.RequiresConsistency(&kgo.Record{Key: []byte{}}) {
		t.Error("a keyed record (empty key included) must stay on its partition")
	}
}

// fnv1a and crc32 put every key where Sarama's NewHashPartitioner and
// NewConsistentCRCHashPartitioner did, so switching the relay from Sarama to franz-go moves no
// key; murmur2 where the Sarama-era murmur2 partitioner (Java's formula) did.
func TestPartitionersMatchSarama(t *testing.T) {
	saramaPartitioners := map[string]sarama.PartitionerConstructor{
		PartitionerFNV1a: sarama.NewHashPartitioner,
		PartitionerCRC32: sarama.NewConsistentCRCHashPartitioner,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for name, newSarama := range saramaPartitioners {
		ours, theirs := partitioner(name).ForTopic("t"), newSarama("t")
		for i := range 5000 {
			key := make([]byte, rng.IntN(40))
			for j := range key {
				key[j] = byte(rng.IntN(256))
			}
			if i%3 == 0 {
				key = fmt.Appendf(nil, "order-%d", i)
			}
			n := 1 + rng.IntN(64)
			want, err := theirs.Partition(&sarama.ProducerMessage{Key: sarama.ByteEncoder(key)}, int32(n))
			if err != nil {
				t.Fatal(err)
			}
			if got := ours.Partition(&kgo.Record{Key: key}, n); got != int(want) {
				t.Fatalf("%s: key %q, %d partitions: got %d, Sarama %d", name, key, n, got, want)
			}
		}
	}
}
