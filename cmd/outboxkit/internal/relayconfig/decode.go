package relayconfig

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// field binds one key of a section to the Go value it fills.
type field struct {
	key    string
	target any   // *string, *int, *bool, *time.Duration or *[]string
	set    *bool // optional: records that the key was present
	// positive rejects an explicit zero or negative number or duration (leaving the key out
	// keeps the default).
	positive bool
}

// renamedKey returns the new path of a key an earlier version read, so that an old file fails
// with the key to write instead of a bare "unknown key".
func renamedKey(path string) (string, bool) {
	switch path {
	case "forwarder.initial_backoff":
		return "forwarder.initial_interval", true
	case "forwarder.max_backoff":
		return "forwarder.max_interval", true
	}
	return "", false
}

// decodeMapping fills fields from the mapping node n found at path. It is a small decoder of
// its own, rather than yaml.v3's Decode with KnownFields, so that every error (an unknown key,
// a duplicate, a value of the wrong type) names the key by its YAML path instead of a Go type.
func decodeMapping(n *yaml.Node, path string, fields []field) error {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: must be a mapping of keys, got %s (line %d)", path, kindName(n), n.Line)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		p := path + "." + k.Value
		if seen[k.Value] {
			return fmt.Errorf("%s: set twice (line %d)", p, k.Line)
		}
		seen[k.Value] = true
		idx := slices.IndexFunc(fields, func(f field) bool { return f.key == k.Value })
		if to, ok := renamedKey(p); ok && idx < 0 {
			return fmt.Errorf("%s: renamed %s (line %d; see CHANGELOG.md)", p, to, k.Line)
		}
		if idx < 0 {
			names := make([]string, len(fields))
			for j, f := range fields {
				names[j] = f.key
			}
			return fmt.Errorf("%s: unknown key (line %d; allowed: %s)", p, k.Line, strings.Join(names, ", "))
		}
		f := fields[idx]
		if isNull(v) {
			continue
		}
		if err := decodeValue(v, p, f.target); err != nil {
			return err
		}
		if f.positive {
			switch t := f.target.(type) {
			case *int:
				if *t <= 0 {
					return fmt.Errorf("%s: must be positive, got %d (line %d; leave it out for the default)", p, *t, v.Line)
				}
			case *time.Duration:
				if *t <= 0 {
					return fmt.Errorf("%s: must be positive, got %v (line %d; leave it out for the default)", p, *t, v.Line)
				}
			}
		}
		if f.set != nil {
			*f.set = true
		}
	}
	return nil
}

func decodeValue(v *yaml.Node, path string, target any) error {
	if list, ok := target.(*[]string); ok {
		if v.Kind != yaml.SequenceNode {
			return fmt.Errorf("%s: must be a list of strings, got %s (line %d)", path, kindName(v), v.Line)
		}
		*list = nil
		for i, item := range v.Content {
			item = resolve(item)
			if item.Kind != yaml.ScalarNode {
				return fmt.Errorf("%s[%d]: must be a string, got %s (line %d)", path, i, kindName(item), item.Line)
			}
			*list = append(*list, item.Value)
		}
		return nil
	}
	if v.Kind != yaml.ScalarNode {
		return fmt.Errorf("%s: must be a single value, got %s (line %d)", path, kindName(v), v.Line)
	}
	raw := strings.TrimSpace(v.Value)
	switch t := target.(type) {
	case *string:
		*t = raw
	case *int:
		n, err := strconv.Atoi(raw)
		if err != nil {
			return fmt.Errorf("%s: must be an integer, got %q (line %d)", path, v.Value, v.Line)
		}
		*t = n
	case *bool:
		switch strings.ToLower(raw) {
		case "true", "yes", "on":
			*t = true
		case "false", "no", "off":
			*t = false
		default:
			return fmt.Errorf("%s: must be true or false, got %q (line %d)", path, v.Value, v.Line)
		}
	case *time.Duration:
		d, err := time.ParseDuration(raw)
		if err != nil {
			return fmt.Errorf("%s: must be a Go duration such as 500ms, 30s or 5m, got %q (line %d)", path, v.Value, v.Line)
		}
		*t = d
	default:
		return fmt.Errorf("%s: internal error: cannot decode into %T", path, target)
	}
	return nil
}

// resolve follows an alias to its anchored node.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	default:
		return "nothing"
	}
}
