package relayconfig

import (
	"fmt"
	"os"

	"gopkg.in/yaml.v3"

	"github.com/outboxkit/outboxkit/outbox"
)

// LoadAdopt reads the mapping file of `outboxkit adopt` (docs/adopting.md): the team's outbox
// table and how its columns map onto outboxkit's. Errors name the file and the key.
func LoadAdopt(path string) (outbox.AdoptConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return outbox.AdoptConfig{}, fmt.Errorf("mapping: %w", err)
	}
	cfg, err := ParseAdopt(data)
	if err != nil {
		return outbox.AdoptConfig{}, fmt.Errorf("mapping %s: %w", path, err)
	}
	return cfg, nil
}

// adoptKeys are the top-level keys of a mapping file.
const adoptKeys = "schema, table, topic_template, columns, status"

// ParseAdopt decodes and validates a mapping file. Unknown keys, at any depth, are errors naming
// the key and the allowed ones.
func ParseAdopt(data []byte) (outbox.AdoptConfig, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return outbox.AdoptConfig{}, fmt.Errorf("invalid YAML: %w", err)
	}
	var top *yaml.Node
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		top = resolve(doc.Content[0])
	}
	if top == nil || top.Kind != yaml.MappingNode {
		return outbox.AdoptConfig{}, fmt.Errorf("the document must be a mapping with the keys %s", adoptKeys)
	}
	var cfg outbox.AdoptConfig
	c, s := &cfg.Columns, &cfg.Status
	seen := map[string]bool{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], resolve(top.Content[i+1])
		if seen[k.Value] {
			return outbox.AdoptConfig{}, fmt.Errorf("%s: set twice (line %d)", k.Value, k.Line)
		}
		seen[k.Value] = true
		var err error
		switch k.Value {
		case "schema", "table", "topic_template":
			target := map[string]*string{"schema": &cfg.Schema, "table": &cfg.Table, "topic_template": &cfg.TopicTemplate}[k.Value]
			if !isNull(v) {
				err = decodeValue(v, k.Value, target)
			}
		case "columns":
			err = decodeMapping(v, "columns", []field{
				{key: "event_id", target: &c.EventID}, {key: "aggregate_id", target: &c.AggregateID},
				{key: "aggregate_type", target: &c.AggregateType}, {key: "event_type", target: &c.EventType},
				{key: "payload", target: &c.Payload}, {key: "headers", target: &c.Headers},
				{key: "created_at", target: &c.CreatedAt}, {key: "topic", target: &c.Topic},
				{key: "status", target: &c.Status}, {key: "published_at", target: &c.PublishedAt},
				{key: "retry_count", target: &c.RetryCount}, {key: "next_retry_at", target: &c.NextRetryAt},
				{key: "last_error", target: &c.LastError},
			})
		case "status":
			err = decodeMapping(v, "status", []field{
				{key: "pending", target: &s.Pending}, {key: "published", target: &s.Published}, {key: "failed", target: &s.Failed},
			})
		default:
			err = fmt.Errorf("%s: unknown key (line %d; allowed: %s)", k.Value, k.Line, adoptKeys)
		}
		if err != nil {
			return outbox.AdoptConfig{}, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return outbox.AdoptConfig{}, err
	}
	return cfg, nil
}
