package schema

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// RegistryConfig is the relay's schema registry section (YAML schema_registry): where the
// Confluent-compatible registry is, how to authenticate, and which schema version to encode with.
// An empty URL turns encoding off.
type RegistryConfig struct {
	// URL is the registry's base URL (for Apicurio, its /apis/ccompat/v7).
	URL string `yaml:"url"`
	// Version is the subject version to encode with; 0 (the default) means the latest.
	Version int `yaml:"version"`
	// LatestTTL is how long the latest version is cached. Default: 1m.
	LatestTTL time.Duration `yaml:"latest_ttl"`
	// SubjectStrategy names each event's subject: topic (<topic>-value, the default), record
	// (the event's event_type) or topic_record (<topic>-<event_type>).
	SubjectStrategy Strategy `yaml:"subject_strategy"`
	// Username and Password are HTTP basic authentication; Password is redacted when printed.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// BearerToken is HTTP bearer authentication (not with Username); redacted when printed.
	BearerToken string `yaml:"bearer_token"`
	// TLS sets the certificate authorities, a client certificate or, for tests, no
	// verification; an https URL needs it only for those.
	TLS RegistryTLS `yaml:"tls"`
	// Topics overrides the subject (outright or by strategy), the version and register for the
	// topics it names.
	Topics map[string]TopicConfig `yaml:"topics"`
	// Register lets the relay register a subject's schema from Schemas when the registry has no
	// version of the subject. Default: false (such a subject fails its lookup).
	Register bool `yaml:"register"`
	// Schemas are the schemas the relay may register, by subject.
	Schemas map[string]SchemaSource `yaml:"schemas"`
	// CacheSize bounds the schemas the relay keeps, by subject and version (least recently used
	// dropped first). Default: 1000 (DefaultCacheSize).
	CacheSize int `yaml:"cache_size"`
	// ServerErrorBound is how long the registry may answer a server error (500 and the other
	// 5xx but 502, 503 and 504) for one subject while it answers its health check before the
	// error counts as the subject's failure, which spends the events' attempts, instead of an
	// outage, which does not. Default: 5m (see ServerErrorBound).
	ServerErrorBound time.Duration `yaml:"server_error_bound"`
}

// On reports whether encoding is configured.
func (c RegistryConfig) On() bool { return c.URL != "" }

// Validate reports the first problem, naming the field by its YAML key and the bad value
// (never a secret).
func (c RegistryConfig) Validate() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url: %q is not an http(s) URL with a host", c.URL)
	}
	if u.User != nil {
		return errors.New("url: has credentials in it; use username and password")
	}
	if err := (Config{Version: c.Version, LatestTTL: c.LatestTTL}).Validate(); err != nil {
		switch {
		case c.Version < 0:
			return fmt.Errorf("version: %d: want 0 (latest) or a version number from 1", c.Version)
		default:
			return fmt.Errorf("latest_ttl: %s is negative", c.LatestTTL)
		}
	}
	if c.CacheSize < 0 {
		return fmt.Errorf("cache_size: %d is negative", c.CacheSize)
	}
	if c.ServerErrorBound < 0 {
		return fmt.Errorf("server_error_bound: %s is negative", c.ServerErrorBound)
	}
	if err := c.SubjectStrategy.Validate(); err != nil {
		return fmt.Errorf("subject_strategy: %q: want %s, %s or %s", string(c.SubjectStrategy), StrategyTopic, StrategyRecord, StrategyTopicRecord)
	}
	for _, topic := range slices.Sorted(maps.Keys(c.Topics)) {
		if err := c.Topics[topic].validate(); err != nil {
			return fmt.Errorf("topics.%s: %w", topic, err)
		}
	}
	schemas, err := loadSchemas(c.Schemas)
	if err != nil {
		return err
	}
	if err := validateRegistration(Config{Version: c.Version, Strategy: c.SubjectStrategy, Topics: c.Topics, Register: c.Register, Schemas: schemas}); err != nil {
		return err
	}
	if c.TLS.set() && u.Scheme != "https" {
		return fmt.Errorf("%s: set, but url %q is not https", c.TLS.firstSet(), c.URL)
	}
	if err := c.TLS.validate(); err != nil {
		return err
	}
	if c.Password != "" && c.Username == "" {
		return errors.New("password: set without username")
	}
	if c.BearerToken != "" && c.Username != "" {
		return errors.New("bearer_token: set together with username (choose basic or bearer authentication)")
	}
	return nil
}

// NewEncoderFromConfig returns an Encoder for c's registry.
func NewEncoderFromConfig(c RegistryConfig) (*Encoder, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("schema_registry.%w", err)
	}
	opts := []sr.ClientOpt{sr.URLs(c.URL), sr.UserAgent("outboxkit")}
	switch {
	case c.Username != "":
		opts = append(opts, sr.BasicAuth(c.Username, c.Password))
	case c.BearerToken != "":
		opts = append(opts, sr.BearerToken(c.BearerToken))
	}
	if c.TLS.set() {
		tlsConfig, err := c.TLS.config()
		if err != nil {
			return nil, fmt.Errorf("schema_registry.%w", err)
		}
		opts = append(opts, sr.DialTLSConfig(tlsConfig))
	}
	client, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schema_registry: %w", err)
	}
	schemas, err := loadSchemas(c.Schemas)
	if err != nil {
		return nil, fmt.Errorf("schema_registry.%w", err)
	}
	return NewEncoder(client, Config{Version: c.Version, LatestTTL: c.LatestTTL, Strategy: c.SubjectStrategy, Topics: c.Topics,
		Register: c.Register, Schemas: schemas, CacheSize: c.CacheSize})
}

// LogValue implements slog.LogValuer with the secrets redacted.
func (c RegistryConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("url", c.URL),
		slog.Int("version", c.Version),
		slog.Duration("latest_ttl", c.LatestTTL),
		slog.String("subject_strategy", string(c.SubjectStrategy)),
		slog.String("username", c.Username),
		slog.String("password", redact(c.Password)),
		slog.String("bearer_token", redact(c.BearerToken)),
		slog.Any("topics", c.Topics),
		slog.Bool("register", c.Register),
		slog.Int("cache_size", c.CacheSize),
		slog.Any("schemas", slices.Sorted(maps.Keys(c.Schemas))),
		slog.Duration("server_error_bound", c.ServerErrorBound),
		slog.Group("tls", slog.String("ca_file", c.TLS.CAFile), slog.String("cert_file", c.TLS.CertFile),
			slog.String("key_file", c.TLS.KeyFile), slog.Bool("insecure_skip_verify", c.TLS.InsecureSkipVerify)),
	)
}

// String prints the configuration with secrets redacted; GoString too, so %#v does.
func (c RegistryConfig) String() string   { return c.LogValue().String() }
func (c RegistryConfig) GoString() string { return c.String() }

func redact(secret string) string {
	if secret == "" {
		return ""
	}
	return "[redacted]"
}
