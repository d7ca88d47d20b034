package pulsar

import (
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
)

// The default configuration asks pulsar-client-go to check the broker's host name
// (ClientOptions.TLSValidateHostname), and says so in connection errors.
func TestHostnameVerificationIsOnByDefault(t *testing.T) {
	cfg := Config{URL: "pulsar+ssl://broker:6651", AuthToken: "x"}
	opts := cfg.clientOptions(&clientLogger{logger: watermill.NopLogger{}, failures: &connFailures{}})
	if !opts.TLSValidateHostname || opts.TLSConfig != nil {
		t.Errorf("default client options: TLSValidateHostname %v, TLSConfig %v; want true and nil", opts.TLSValidateHostname, opts.TLSConfig)
	}
	if d := cfg.describe(); !strings.Contains(d, "hostname verification on") {
		t.Errorf("describe() = %q, want hostname verification on", d)
	}
}
