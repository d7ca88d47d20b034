package brokerconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// relayFile is the document Parse decodes: the broker part, plus the outboxkit CLI's own
// sections, accepted and left alone so that Load reads the relay's configuration file too.
type relayFile struct {
	Config    `yaml:",inline"`
	Database  yaml.Node `yaml:"database"`
	Forwarder yaml.Node `yaml:"forwarder"`
	HTTP      yaml.Node `yaml:"http"`
	Log       yaml.Node `yaml:"log"`
}

// decode decodes data (unknown keys are errors) and names the key of each of yaml.v3's type
// errors: "kafka.message_max_bytes (line 3): cannot unmarshal !!str `lots` into int".
func decode(data []byte) (Config, error) {
	var f relayFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(&f)
	if err == nil || errors.Is(err, io.EOF) {
		return f.Config, nil
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return Config{}, fmt.Errorf("invalid YAML: %w", err)
	}
	paths := keyPaths(data)
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = namedTypeError(m, paths)
	}
	return Config{}, errors.New(strings.Join(msgs, "; "))
}

var typeErrorLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// namedTypeError rewrites yaml.v3's "line N: msg" as "path (line N): msg" when a key's value is
// on line N.
func namedTypeError(msg string, paths map[int]string) string {
	m := typeErrorLine.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	line, _ := strconv.Atoi(m[1])
	if p, ok := paths[line]; ok {
		return fmt.Sprintf("%s (line %d): %s", p, line, m[2])
	}
	return msg
}

// keyPaths maps each line holding a value to the dotted key path of that value (the deepest
// one when a line holds several, as in flow style; an item of a list of lists is not entered).
func keyPaths(data []byte) map[int]string {
	var doc yaml.Node
	out := map[int]string{}
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return out
	}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := n.Content[i].Value
				if path != "" {
					p = path + "." + p
				}
				out[n.Content[i+1].Line] = p
				walk(n.Content[i+1], p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				out[c.Line] = p
				if c.Kind == yaml.MappingNode { // a list in a list is reported as the outer item
					walk(c, p)
				}
			}
		case yaml.AliasNode:
			if n.Alias != nil {
				walk(n.Alias, path)
			}
		}
	}
	walk(doc.Content[0], "")
	return out
}
