// Package relayconfig loads the outboxkit CLI's configuration file: the database, forwarder,
// http and log sections, plus the broker part (broker, kafka, pulsar, nats, rabbitmq, kfake) that
// brokers/brokerconfig parses, with environment overrides, defaults and validation. Every error
// names the bad key by its YAML path; the DSN password and broker secrets never appear in errors.
package relayconfig

import (
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// Config is the whole CLI configuration.
type Config struct {
	Database  Database
	Forwarder Forwarder
	HTTP      HTTP
	Log       Log
	// Broker is the broker part, parsed by brokerconfig. It is zero when the configuration was
	// loaded without it (Options.Broker false).
	Broker brokerconfig.Config
}

// Options says what Load and Parse read besides the database, forwarder, http and log sections.
type Options struct {
	// Broker parses and validates the broker part (the relay needs it; the admin commands do not,
	// and then ignore it).
	Broker bool
}

// Load reads the YAML file at path; see Parse.
func Load(path string, lookupEnv func(string) (string, bool), opts Options) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	cfg, err := Parse(data, lookupEnv, opts)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse decodes the configuration, applies the environment overrides (lookupEnv is usually
// os.LookupEnv; nil ignores the environment), fills the defaults and validates the result.
// Unknown keys, at any depth, are errors.
func Parse(data []byte, lookupEnv func(string) (string, bool), opts Options) (Config, error) {
	top, err := topNode(data)
	if err != nil {
		return Config{}, err
	}
	cfg, brokerKeys, err := decodeSections(top)
	if err != nil {
		return Config{}, err
	}
	if err := cfg.applyEnv(lookupEnv); err != nil {
		return Config{}, err
	}
	if err := cfg.validate(); err != nil {
		return Config{}, nameEnvInError(err, lookupEnv)
	}
	if opts.Broker {
		if err := cfg.parseBroker(data, top, brokerKeys, lookupEnv); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

// topNode decodes data and returns the document's top-level node: nil or a null node for an
// empty document, else the mapping of sections.
func topNode(data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	var top *yaml.Node
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		top = resolve(doc.Content[0])
	}
	if !isNull(top) && top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("the document must be a mapping of sections (database, forwarder, http, log, broker, ...), got %s", kindName(top))
	}
	return top, nil
}

// decodeSections decodes the CLI's own sections of top, fills the defaults that depend on
// whether a key was present, and returns the top-level keys of the broker part (checked for
// unknown keys, left to brokerconfig to decode).
func decodeSections(top *yaml.Node) (Config, []*yaml.Node, error) {
	var cfg Config
	cfg.HTTP.Listen = DefaultListen
	var (
		listenSet  bool
		brokerKeys []*yaml.Node
	)
	if !isNull(top) {
		seen := map[string]bool{}
		for i := 0; i+1 < len(top.Content); i += 2 {
			k, v := top.Content[i], resolve(top.Content[i+1])
			if seen[k.Value] {
				return Config{}, nil, fmt.Errorf("%s: set twice (line %d)", k.Value, k.Line)
			}
			seen[k.Value] = true
			if isBrokerSection(k.Value) {
				brokerKeys = append(brokerKeys, k)
			}
			if err := cfg.decodeSection(k, v, &listenSet); err != nil {
				return Config{}, nil, err
			}
		}
	}
	if !listenSet {
		cfg.HTTP.Listen = DefaultListen // absent or null; an explicit "" disables the endpoint
	}
	if cfg.Log.Format == "" {
		cfg.Log.Format = "text"
	}
	return cfg, brokerKeys, nil
}

// decodeSection decodes the top-level section named by key k from its node v; a broker-part
// section is only checked for unknown keys. listenSet records that http.listen was given.
func (c *Config) decodeSection(k, v *yaml.Node, listenSet *bool) error {
	switch {
	case k.Value == "database":
		return decodeMapping(v, "database", c.Database.fields())
	case k.Value == "forwarder":
		return decodeMapping(v, "forwarder", c.Forwarder.fields())
	case k.Value == "http":
		return decodeMapping(v, "http", c.HTTP.fields(listenSet))
	case k.Value == "log":
		return c.Log.decode(v)
	case isBrokerSection(k.Value):
		return checkKnownKeys(v, k.Value, brokerFieldType(k.Value))
	default:
		return fmt.Errorf("%s: unknown section (line %d; allowed: database, forwarder, http, log, %s)", k.Value, k.Line,
			strings.Join(brokerSections(), ", "))
	}
}

// applyEnv applies the environment overrides of the CLI's own keys.
func (c *Config) applyEnv(lookupEnv func(string) (string, bool)) error {
	if err := c.Database.applyEnv(lookupEnv); err != nil {
		return err
	}
	c.Forwarder.applyEnv(lookupEnv)
	return nil
}

// validate fills the defaults of the database section and checks every section.
func (c *Config) validate() error {
	if err := c.Database.validate(); err != nil {
		return err
	}
	if err := c.Forwarder.validate(); err != nil {
		return err
	}
	if src := forwarder.Source(c.Forwarder.Source); (src == forwarder.SourceCDC || src == forwarder.SourceWAL) && c.Database.Dialect != outbox.Postgres {
		return fmt.Errorf("forwarder.source: %s needs database.dialect postgres, not %s", c.Forwarder.Source, c.Database.Dialect)
	}
	return c.HTTP.validate()
}
