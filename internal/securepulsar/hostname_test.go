package securepulsar_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/internal/securepulsar"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// A man in the middle at 127.0.0.1 presents a certificate that the trusted CA signed for
// another host (impostor.invalid) and forwards to the real secure broker. With the default
// settings the publisher refuses it: no handshake, and the token never reaches the impostor.
// With TLSSkipHostnameVerification it publishes through the impostor, which then holds the
// token: the reason the opt-out is documented as unsafe. The chain is still checked: an
// impostor whose certificate no trusted CA signed is refused even then.
func TestHostnameVerification(t *testing.T) {
	b := securepulsar.Start(t)
	m := b.StartImpostor(t, "impostor.invalid")
	token := b.Token(t, securepulsar.RelayRole, time.Hour)
	cfg := pulsar.Config{
		URL:               m.URL,
		AuthToken:         token,
		TLSTrustCertsFile: b.CAFile,
		Tenant:            "secure",
		Namespace:         "granted",
		OperationTimeout:  5 * time.Second,
		ConnectionTimeout: 3 * time.Second,
	}

	t.Run("default refuses", func(t *testing.T) {
		err := publishOne(t, cfg, watermill.NopLogger{})
		if err == nil {
			t.Fatalf("published through an impostor whose certificate names %s, not 127.0.0.1", m.Name)
		}
		if !strings.Contains(err.Error(), "hostname verification on") || !strings.Contains(err.Error(), "x509: certificate is valid for impostor.invalid") &&
			!strings.Contains(err.Error(), "doesn't contain any IP SANs") {
			t.Errorf("the refusal does not say the certificate names another host: %v", err)
		}
		if bytes.Contains(m.Seen(), []byte(token)) {
			t.Errorf("the token reached the impostor")
		}
	})

	t.Run("opt-out accepts, and leaks the token", func(t *testing.T) {
		skip := cfg
		skip.TLSSkipHostnameVerification = true
		logs := watermill.NewCaptureLogger()
		if err := publishOne(t, skip, logs); err != nil {
			t.Fatalf("TLSSkipHostnameVerification: publish through the impostor: %v", err)
		}
		if !bytes.Contains(m.Seen(), []byte(token)) {
			t.Errorf("the impostor did not see the token: the test does not show what the opt-out risks")
		}
		warned := false
		for _, c := range logs.Captured()[watermill.InfoLogLevel] {
			if strings.Contains(c.Msg, "TLS hostname verification is OFF") && c.Fields["pulsar_level"] == "warn" {
				warned = true
			}
		}
		if !warned {
			t.Errorf("no warning that hostname verification is off: %v", logs.Captured())
		}
	})

	t.Run("opt-out still checks the chain", func(t *testing.T) {
		skip := cfg
		skip.TLSSkipHostnameVerification = true
		skip.TLSTrustCertsFile = b.UntrustedCAFile
		if err := publishOne(t, skip, watermill.NopLogger{}); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Errorf("TLSSkipHostnameVerification with a CA that signed nothing: %v, want unknown authority", err)
		}
	})
}

// publishOne publishes one message with cfg and returns the error.
func publishOne(t *testing.T, cfg pulsar.Config, logger watermill.LoggerAdapter) error {
	t.Helper()
	pub, err := pulsar.NewPublisher(pulsar.PublisherConfig{Config: cfg}, logger)
	if err != nil {
		return err
	}
	defer pub.Close()
	return pub.Publish(testsupport.UniqueName("hostname"), message.NewMessage(watermill.NewUUID(), []byte("x")))
}
