package relayconfig

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/forwarder"
)

// isBrokerSection reports whether a top-level key belongs to the broker part, which
// brokerconfig parses: a YAML key of brokerconfig.Config, so a section brokerconfig reads is
// never refused here.
func isBrokerSection(key string) bool { return brokerFieldType(key) != nil }

// brokerSections are the top-level keys of the broker part, in brokerconfig.Config's order.
func brokerSections() []string {
	t := reflect.TypeOf(brokerconfig.Config{})
	keys := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		keys = append(keys, yamlName(t.Field(i)))
	}
	return keys
}

// parseBroker parses the broker part (the top-level keys brokerKeys of the document top, read
// from data) into c.Broker and checks that the broker offers the forwarder's delivery mode.
func (c *Config) parseBroker(data []byte, top *yaml.Node, brokerKeys []*yaml.Node, lookupEnv func(string) (string, bool)) error {
	brokerYAML, err := brokerDocument(data, top, brokerKeys)
	if err != nil {
		return err
	}
	if c.Broker, err = brokerconfig.Parse(brokerYAML, lookupEnv); err != nil {
		return err
	}
	if reason, refused := exactlyOnceRefused[c.Broker.Broker]; refused && c.Forwarder.Delivery == string(forwarder.ExactlyOnce) {
		return nameEnvInError(fmt.Errorf("forwarder.delivery: %q needs broker kafka (or kfake), not %q: %s (docs/exactly-once.md)",
			c.Forwarder.Delivery, c.Broker.Broker, reason), lookupEnv)
	}
	return nil
}

// exactlyOnceRefused gives, per broker without the exactly-once delivery mode, why.
var exactlyOnceRefused = map[string]string{
	brokerconfig.BrokerPulsar: "Pulsar transactions cannot fence a paused relay's commit",
	brokerconfig.BrokerNATS: "JetStream has no transaction spanning the records and a checkpoint, and its " +
		"duplicate window only bounds duplicates in time",
	brokerconfig.BrokerRabbitMQ: "RabbitMQ has no transaction spanning the messages and a checkpoint (AMQP transactions " +
		"are per channel and cannot fence a paused relay), and no broker-side deduplication",
}

// CheckRelay returns an error if cfg, loaded with Options.Broker, cannot serve the relay command:
// today, broker kfake. The relay removes a row once the broker acknowledged it, and an
// in-process kfake cluster acknowledges every record and forgets it when the process exits, so
// a relay on kfake would delete events that no one can read. The quickstart and the tests use
// kfake through the library (brokerconfig.Build), where the reader shares the process; the admin
// commands, which publish nothing, accept it too. lookupEnv (usually os.LookupEnv) tells whether
// the value came from brokerconfig.EnvBroker, so the error names where to fix it.
func CheckRelay(cfg Config, lookupEnv func(string) (string, bool)) error {
	if cfg.Broker.Broker != brokerconfig.BrokerKFake {
		return nil
	}
	source := "broker"
	if lookupEnv != nil {
		if v, ok := lookupEnv(brokerconfig.EnvBroker); ok && strings.EqualFold(strings.TrimSpace(v), brokerconfig.BrokerKFake) {
			source = brokerconfig.EnvBroker
		}
	}
	return fmt.Errorf("%s: kfake is an in-process test cluster: the relay would delete events that no one can read; "+
		"use kafka or pulsar (the quickstart and tests use kfake through the library)", source)
}

// Warnings returns the unsafe settings of cfg that the relay logs at warn level when it starts:
// today, Pulsar TLS hostname verification turned off.
func (c Config) Warnings() []string {
	var out []string
	if c.Broker.Broker == brokerconfig.BrokerPulsar && c.Broker.Pulsar.TLSSkipHostnameVerification {
		out = append(out, "pulsar.tls_skip_hostname_verification is true: TLS hostname verification is OFF, any "+
			"certificate signed by a trusted CA is accepted for any host, and the token goes to whoever presents one")
	}
	return out
}

// brokerDocument returns the YAML that brokerconfig.Parse reads: the original text with the
// lines of the CLI's own sections blanked, so brokerconfig's errors keep the file's line
// numbers. A document written in flow style ({...} on one line) is re-encoded instead.
func brokerDocument(data []byte, top *yaml.Node, brokerKeys []*yaml.Node) ([]byte, error) {
	if top == nil || len(brokerKeys) == 0 {
		return nil, nil
	}
	if top.Style&yaml.FlowStyle != 0 {
		m := &yaml.Node{Kind: yaml.MappingNode}
		for i := 0; i+1 < len(top.Content); i += 2 {
			if slices.Contains(brokerKeys, top.Content[i]) {
				m.Content = append(m.Content, top.Content[i], top.Content[i+1])
			}
		}
		out, err := yaml.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("broker sections: %w", err)
		}
		return out, nil
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	// Each top-level key owns the lines from its own up to the next top-level key.
	for i := 0; i+1 < len(top.Content); i += 2 {
		k := top.Content[i]
		if slices.Contains(brokerKeys, k) {
			continue
		}
		end := len(lines) // exclusive, 1-based line numbers: lines[k.Line-1 : end]
		if i+2 < len(top.Content) {
			end = top.Content[i+2].Line - 1
		}
		for l := k.Line - 1; l < end && l < len(lines); l++ {
			lines[l] = []byte("\n")
		}
	}
	return bytes.Join(lines, nil), nil
}

// brokerFieldType returns the Go type brokerconfig decodes a top-level broker key into.
func brokerFieldType(key string) reflect.Type {
	t := reflect.TypeOf(brokerconfig.Config{})
	for i := range t.NumField() {
		if yamlName(t.Field(i)) == key {
			return t.Field(i).Type
		}
	}
	return nil
}

func yamlName(f reflect.StructField) string {
	tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if tag == "" {
		return strings.ToLower(f.Name)
	}
	return tag
}

// checkKnownKeys reports the first mapping key under n that the struct type t does not have,
// by its YAML path. brokerconfig rejects unknown keys too (yaml.v3's KnownFields), but its
// message names the Go type rather than the key's path; this check runs first to name the path.
func checkKnownKeys(n *yaml.Node, path string, t reflect.Type) error {
	n = resolve(n)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct || n.Kind != yaml.MappingNode {
		return nil // scalars, lists and type mismatches are left to brokerconfig
	}
	fields := map[string]reflect.Type{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Tag.Get("yaml") == "-" {
			continue
		}
		name := yamlName(f)
		fields[name] = f.Type
		names = append(names, name)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		ft, ok := fields[k.Value]
		if !ok {
			return fmt.Errorf("%s.%s: unknown key (line %d; allowed: %s)", path, k.Value, k.Line, strings.Join(names, ", "))
		}
		if err := checkKnownKeys(n.Content[i+1], path+"."+k.Value, ft); err != nil {
			return err
		}
	}
	return nil
}
