package monitoring

import (
	"testing"

	"github.com/outboxkit/outboxkit/internal/faultinject"
)

// TestDedicatedBrokerPortsAreFree: the dedicated Kafkas of this package listen on ports no
// broker of internal/faultinject uses. The two packages' tests run at the same time under
// `go test -p 2 ./...`: a shared port makes one broker's start find the other's listener
// ("already running") or fail to bind, and a test that stops "its" broker stop nothing.
func TestDedicatedBrokerPortsAreFree(t *testing.T) {
	used := map[int]string{}
	claim := func(port int, what string) {
		if other, ok := used[port]; ok {
			t.Errorf("port %d is used by %s and by %s", port, other, what)
			return
		}
		used[port] = what
	}
	for i := range 3 {
		claim(faultinject.DefaultKafkaClusterPort+i, "internal/faultinject's Kafka cluster (clients)")
		claim(faultinject.DefaultKafkaClusterControllerPort+i, "internal/faultinject's Kafka cluster (controllers)")
	}
	for _, p := range []struct {
		port int
		what string
	}{
		{faultinject.DefaultKafkaPort, "internal/faultinject's Kafka"},
		{faultinject.DefaultKafkaControllerPort, "internal/faultinject's Kafka controller"},
		{faultinject.DefaultPulsarPort, "internal/faultinject's Pulsar"},
		{faultinject.DefaultPulsarHTTPPort, "internal/faultinject's Pulsar HTTP"},
		{faultinject.DefaultPulsarBookiePort, "internal/faultinject's Pulsar bookie"},
		{faultinject.DefaultNATSPort, "internal/faultinject's NATS"},
		{faultinject.DefaultNATSMonitorPort, "internal/faultinject's NATS monitor"},
		{faultinject.DefaultRabbitMQPort, "internal/faultinject's RabbitMQ"},
		{faultinject.DefaultRabbitMQTLSPort, "internal/faultinject's RabbitMQ TLS"},
		{faultinject.DefaultRabbitMQDistPort, "internal/faultinject's RabbitMQ distribution"},
		{faultinject.DefaultRabbitMQEPMDPort, "internal/faultinject's RabbitMQ epmd"},
		{kafkaPort, "TestBacklogAlertFiresWhenTheBrokerStops' Kafka"},
		{kafkaControllerPort, "TestBacklogAlertFiresWhenTheBrokerStops' Kafka controller"},
		{stallKafkaPort, "TestPublishStallWarnsWhenTheBrokerStops' Kafka"},
		{stallKafkaControllerPort, "TestPublishStallWarnsWhenTheBrokerStops' Kafka controller"},
	} {
		claim(p.port, p.what)
	}
}
