package kafka_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxkit/outboxkit/brokers/kafka"
)

// Each SASL mechanism authenticates against a kfake cluster that requires it; a wrong password
// is refused and never shown in the error.
func TestSASLMechanisms(t *testing.T) {
	for _, mech := range []string{kafka.SASLPlain, kafka.SASLScramSHA256, kafka.SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
				kfake.Superuser(mech, "relay", "right-password"), kfake.SeedTopics(2, "events"))
			if err != nil {
				t.Fatal(err)
			}
			defer cluster.Close()
			cfg := kafka.Config{Brokers: cluster.ListenAddrs(), Version: "2.3.0",
				SASL: kafka.SASLConfig{Mechanism: mech, Username: "relay", Password: "right-password"}}
			pub, err := kafka.NewPublisher(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := pub.Publish("events", keyed("a", []byte("x")), keyed("b", []byte("y"))); err != nil {
				t.Fatalf("publish with %s: %v", mech, err)
			}
			_ = pub.Close()

			cfg.SASL.Password = "wrong-password"
			pub, err = kafka.NewPublisher(cfg, nil)
			if err == nil {
				err = pub.Publish("events", keyed("a", []byte("x")))
				_ = pub.Close()
			}
			if err == nil {
				t.Fatal("a wrong password was accepted")
			}
			if strings.Contains(err.Error(), "wrong-password") {
				t.Errorf("the error shows the password: %v", err)
			}
			// No Retriable check here: kfake closes the connection on a failed authentication,
			// so Sarama sees EOF (ErrOutOfBrokers, retriable, like a broker that is down); a real
			// Kafka answers SASL_AUTHENTICATION_FAILED, which Retriable classifies as permanent.
		})
	}
}
