package monitoring

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Override changes one alert rule of a rules file, for a test that cannot wait for the
// production thresholds: the rest of the expression stays the committed one.
type Override struct {
	// Replace maps a substring of the rule's expr (it must occur exactly once) to its replacement,
	// for example "> 300" to "> 8".
	Replace map[string]string
	// For replaces the rule's `for` duration when not empty (the rule must have one).
	For string
}

// OverrideRules returns the Prometheus rules file src with the alert rules named in overrides
// changed as they say. Every named alert must exist; nothing else in the file changes.
func OverrideRules(src []byte, overrides map[string]Override) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("parse rules: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, fmt.Errorf("parse rules: empty document")
	}
	groups := mappingValue(doc.Content[0], "groups")
	if groups == nil || groups.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("rules: no groups list")
	}
	done := map[string]bool{}
	for _, group := range groups.Content {
		rules := mappingValue(group, "rules")
		if rules == nil || rules.Kind != yaml.SequenceNode {
			continue
		}
		for _, rule := range rules.Content {
			alert := mappingValue(rule, "alert")
			if alert == nil {
				continue
			}
			ov, ok := overrides[alert.Value]
			if !ok {
				continue
			}
			if err := apply(rule, ov); err != nil {
				return nil, fmt.Errorf("alert %s: %w", alert.Value, err)
			}
			done[alert.Value] = true
		}
	}
	for name := range overrides {
		if !done[name] {
			return nil, fmt.Errorf("alert %s: not in the rules file", name)
		}
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, fmt.Errorf("write rules: %w", err)
	}
	return out, nil
}

func apply(rule *yaml.Node, ov Override) error {
	expr := mappingValue(rule, "expr")
	if expr == nil {
		return fmt.Errorf("no expr")
	}
	olds := make([]string, 0, len(ov.Replace))
	for old := range ov.Replace {
		olds = append(olds, old)
	}
	slices.Sort(olds)
	for _, old := range olds {
		if n := strings.Count(expr.Value, old); n != 1 {
			return fmt.Errorf("expr %q contains %q %d times, want exactly once", expr.Value, old, n)
		}
		expr.Value = strings.Replace(expr.Value, old, ov.Replace[old], 1)
	}
	if ov.For != "" {
		f := mappingValue(rule, "for")
		if f == nil {
			return fmt.Errorf("no `for` to replace")
		}
		f.Value = ov.For
	}
	return nil
}

// mappingValue returns the value of key in the mapping node m, or nil.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
