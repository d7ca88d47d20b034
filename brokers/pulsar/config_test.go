package pulsar_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
)

const secretToken = "s3cr3t-token-never-printed"

func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "exists.pem")
	if err := os.WriteFile(existing, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	base := func() pulsar.Config { return pulsar.Config{URL: "pulsar://127.0.0.1:6650"} }

	for _, tc := range []struct {
		name    string
		mutate  func(*pulsar.Config)
		wantErr []string // substrings; nil means valid
	}{
		{"valid minimal", func(*pulsar.Config) {}, nil},
		{"valid full", func(c *pulsar.Config) {
			c.URL = "pulsar+ssl://broker:6651"
			c.AuthToken = secretToken
			c.TLSTrustCertsFile = existing
			c.TLSSkipHostnameVerification = true
			c.OperationTimeout = time.Second
			c.ConnectionTimeout = time.Second
			c.Tenant = "acme"
			c.Namespace = "orders-ns"
		}, nil},
		{"valid mutual TLS", func(c *pulsar.Config) { c.TLSCertFile, c.TLSKeyFile = existing, existing }, nil},
		{"URL empty", func(c *pulsar.Config) { c.URL = "" }, []string{"URL is required"}},
		{"URL unparsable", func(c *pulsar.Config) { c.URL = "pulsar://%zz" }, []string{"URL is not a valid URL"}},
		{"URL scheme", func(c *pulsar.Config) { c.URL = "kafka://127.0.0.1:9092" }, []string{"URL", `"kafka"`}},
		{"URL credentials redacted", func(c *pulsar.Config) { c.URL = "ftp://user:" + secretToken + "@h" }, []string{"URL", "xxxxx"}},
		{"URL without host", func(c *pulsar.Config) { c.URL = "pulsar:///path" }, []string{"URL", "no host"}},
		{"token and token file", func(c *pulsar.Config) { c.AuthToken, c.AuthTokenFile = secretToken, existing },
			[]string{"AuthToken and AuthTokenFile"}},
		{"TLS auth with token", func(c *pulsar.Config) {
			c.AuthToken, c.TLSCertFile, c.TLSKeyFile = secretToken, existing, existing
		}, []string{"TLSCertFile", "token"}},
		{"TLS cert without key", func(c *pulsar.Config) { c.TLSCertFile = existing }, []string{"TLSCertFile", "TLSKeyFile"}},
		{"TLS key without cert", func(c *pulsar.Config) { c.TLSKeyFile = existing }, []string{"TLSCertFile", "TLSKeyFile"}},
		{"token file missing", func(c *pulsar.Config) { c.AuthTokenFile = missing }, []string{"AuthTokenFile", missing}},
		{"trust certs missing", func(c *pulsar.Config) { c.TLSTrustCertsFile = missing }, []string{"TLSTrustCertsFile", missing}},
		{"cert file missing", func(c *pulsar.Config) { c.TLSCertFile, c.TLSKeyFile = missing, existing }, []string{"TLSCertFile", missing}},
		{"key file missing", func(c *pulsar.Config) { c.TLSCertFile, c.TLSKeyFile = existing, missing }, []string{"TLSKeyFile", missing}},
		{"OperationTimeout negative", func(c *pulsar.Config) { c.OperationTimeout = -time.Second }, []string{"OperationTimeout", "-1s"}},
		{"ConnectionTimeout negative", func(c *pulsar.Config) { c.ConnectionTimeout = -time.Second }, []string{"ConnectionTimeout", "-1s"}},
		{"Tenant invalid", func(c *pulsar.Config) { c.Tenant = "a/b" }, []string{"Tenant", `"a/b"`}},
		{"Namespace invalid", func(c *pulsar.Config) { c.Namespace = "x y" }, []string{"Namespace", `"x y"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.mutate(&cfg)
			if cfg.TLSCertFile == "" && cfg.TLSKeyFile == "" && cfg.AuthTokenFile == "" {
				// A token wherever it is allowed proves it never leaks into an error.
				cfg.AuthToken = secretToken
			}
			checkValidate(t, cfg.Validate(), tc.wantErr)
		})
	}
}

func checkValidate(t *testing.T, err error, wantErr []string) {
	t.Helper()
	if wantErr == nil {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want one containing %q", wantErr)
	}
	for _, want := range wantErr {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), secretToken) {
		t.Errorf("error leaks the secret: %v", err)
	}
}

func TestPublisherConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(*pulsar.PublisherConfig)
		wantErr []string
	}{
		{"valid", func(*pulsar.PublisherConfig) {}, nil},
		{"valid tuned", func(c *pulsar.PublisherConfig) {
			c.KeyMetadata, c.Compression, c.MixedKeyBatches = "tenant_id", pulsar.CompressionZSTD, true
			c.BatchingMaxMessages, c.BatchingMaxSize, c.BatchingMaxPublishDelay = 10, 1024, time.Millisecond
		}, nil},
		{"connection field", func(c *pulsar.PublisherConfig) { c.URL = "" }, []string{"URL"}},
		{"SendTimeout negative", func(c *pulsar.PublisherConfig) { c.SendTimeout = -time.Second }, []string{"SendTimeout", "-1s"}},
		{"MaxPendingMessages negative", func(c *pulsar.PublisherConfig) { c.MaxPendingMessages = -1 }, []string{"MaxPendingMessages", "-1"}},
		{"BatchingMaxPublishDelay negative", func(c *pulsar.PublisherConfig) { c.BatchingMaxPublishDelay = -time.Millisecond },
			[]string{"BatchingMaxPublishDelay", "-1ms"}},
		{"Compression unknown", func(c *pulsar.PublisherConfig) { c.Compression = "brotli" }, []string{"Compression", `"brotli"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := pulsar.PublisherConfig{Config: pulsar.Config{URL: "pulsar://127.0.0.1:6650", AuthToken: secretToken}}
			tc.mutate(&cfg)
			checkValidate(t, cfg.Validate(), tc.wantErr)
			// The constructor applies defaults, validates and wraps; no broker is contacted
			// before the first Publish, so this runs without one.
			pub, err := pulsar.NewPublisher(cfg, watermill.NopLogger{})
			if err == nil {
				_ = pub.Close()
			}
			checkValidate(t, err, tc.wantErr)
		})
	}
}

func TestSubscriberConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(*pulsar.SubscriberConfig)
		wantErr []string
	}{
		{"valid", func(*pulsar.SubscriberConfig) {}, nil},
		{"valid tuned", func(c *pulsar.SubscriberConfig) {
			c.SubscriptionType, c.InitialPosition = pulsar.SubscriptionFailover, pulsar.PositionLatest
			c.ReceiverQueueSize, c.NackRedeliveryDelay = 10, time.Minute
			c.DeadLetter = &pulsar.DeadLetterPolicy{MaxDeliveries: 5, Topic: "orders-dlq"}
		}, nil},
		{"connection field", func(c *pulsar.SubscriberConfig) { c.OperationTimeout = -1 }, []string{"OperationTimeout"}},
		{"SubscriptionName empty", func(c *pulsar.SubscriberConfig) { c.SubscriptionName = " " }, []string{"SubscriptionName", `" "`}},
		{"SubscriptionType unknown", func(c *pulsar.SubscriberConfig) { c.SubscriptionType = "fanout" }, []string{"SubscriptionType", `"fanout"`}},
		{"InitialPosition unknown", func(c *pulsar.SubscriberConfig) { c.InitialPosition = "middle" }, []string{"InitialPosition", `"middle"`}},
		{"NackRedeliveryDelay negative", func(c *pulsar.SubscriberConfig) { c.NackRedeliveryDelay = -time.Second },
			[]string{"NackRedeliveryDelay", "-1s"}},
		{"ReceiverQueueSize negative", func(c *pulsar.SubscriberConfig) { c.ReceiverQueueSize = -5 }, []string{"ReceiverQueueSize", "-5"}},
		{"DeadLetter.MaxDeliveries zero", func(c *pulsar.SubscriberConfig) { c.DeadLetter = &pulsar.DeadLetterPolicy{} },
			[]string{"DeadLetter.MaxDeliveries", "0"}},
		{"DeadLetter.Topic invalid", func(c *pulsar.SubscriberConfig) {
			c.DeadLetter = &pulsar.DeadLetterPolicy{MaxDeliveries: 1, Topic: "a/b"}
		}, []string{"DeadLetter.Topic", `"a/b"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := pulsar.SubscriberConfig{
				Config:           pulsar.Config{URL: "pulsar://127.0.0.1:6650", AuthToken: secretToken},
				SubscriptionName: "billing",
			}
			tc.mutate(&cfg)
			checkValidate(t, cfg.Validate(), tc.wantErr)
			sub, err := pulsar.NewSubscriber(cfg, watermill.NopLogger{})
			if err == nil {
				_ = sub.Close()
			}
			checkValidate(t, err, tc.wantErr)
		})
	}
}

func TestFullTopicName(t *testing.T) {
	cfg := pulsar.Config{Tenant: "acme", Namespace: "prod"}
	for _, tc := range []struct{ in, want string }{
		{"orders", "persistent://acme/prod/orders"},
		{"other/ns/orders", "persistent://other/ns/orders"},
		{"persistent://t/n/orders", "persistent://t/n/orders"},
		{"non-persistent://t/n/orders", "non-persistent://t/n/orders"},
		{"", ""},
		{"a/b", ""},
		{"a//c", ""},
		{"a/b/c/d", ""},
		{"persistent://t/n", ""},
		{"http://t/n/x", ""},
		{"has space", ""},
	} {
		got, err := cfg.FullTopicName(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("FullTopicName(%q) = %q, want an error", tc.in, got)
			} else if tc.in != "" && !strings.Contains(err.Error(), tc.in) {
				t.Errorf("FullTopicName(%q) error %q does not name the topic", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("FullTopicName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if got, _ := (pulsar.Config{}).FullTopicName("orders"); got != "persistent://public/default/orders" {
		t.Errorf("default tenant/namespace: %q", got)
	}
}
