package schema

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSchemaLinksNoBrokerClient: the encoder and its decorator name no broker (the capability of
// a broker with its own registry carries a nativeschema.Schema), so a program that publishes to
// Kafka only does not link the Pulsar client by importing brokers/schema.
func TestSchemaLinksNoBrokerClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "./nativeschema").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "pulsar") || strings.Contains(dep, "outboxkit/brokers/kafka") {
			t.Errorf("brokers/schema imports %s (a broker's package)", dep)
		}
	}
}
