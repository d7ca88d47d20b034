package rabbitmq_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/rabbitmq"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestTLS: the RabbitMQ node's TLS listener, whose certificate a private CA signed, is reached
// with tls.ca_file naming that CA (a message published and confirmed, and a subscriber
// connected), refused with another CA and with the system pool, and reached with
// insecure_skip_verify (tests only).
func TestTLS(t *testing.T) {
	url, caDir := testsupport.RabbitMQTLS(t)
	for _, tc := range []struct {
		name string
		tls  rabbitmq.TLSConfig
		ok   bool
	}{
		{"ca_file", rabbitmq.TLSConfig{CAFile: filepath.Join(caDir, "ca.pem")}, true},
		{"untrusted ca_file", rabbitmq.TLSConfig{CAFile: filepath.Join(caDir, "untrusted-ca.pem")}, false},
		{"system pool", rabbitmq.TLSConfig{}, false},
		{"insecure_skip_verify", rabbitmq.TLSConfig{InsecureSkipVerify: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := rabbitmq.Config{URL: url, TLS: tc.tls}
			pub, err := rabbitmq.NewPublisher(cfg, testLogger())
			if !tc.ok {
				if err == nil {
					_ = pub.Close()
					t.Fatal("connected to a server whose certificate is not trusted")
				}
				if !strings.Contains(err.Error(), "certificate") {
					t.Errorf("error %v, want a certificate verification failure", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("new publisher: %v", err)
			}
			defer pub.Close()
			topic := testsupport.UniqueName("tls")
			defer deleteTopic(t, testConfig(t).URL, topic, 0)
			if errs := pub.PublishEach(t.Context(), topic, []*message.Message{keyed("a", 0)}); errs[0] != nil {
				t.Fatalf("publish: %v", errs[0])
			}
			sub, err := rabbitmq.NewSubscriber(cfg, testLogger())
			if err != nil {
				t.Fatalf("new subscriber: %v", err)
			}
			defer sub.Close()
			msgs, err := sub.Subscribe(t.Context(), topic)
			if err != nil {
				t.Fatalf("subscribe: %v", err)
			}
			select {
			case msg := <-msgs:
				msg.Ack()
			case <-time.After(2 * time.Minute): // a bound against a hang
				t.Fatal("the subscriber over TLS received nothing in 2 minutes")
			}
		})
	}
}
