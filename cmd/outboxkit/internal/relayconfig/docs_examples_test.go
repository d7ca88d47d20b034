package relayconfig

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
)

// docsDir is the repository's docs directory, from this package.
const docsDir = "../../../../docs"

// relaySections are the relay's own top-level keys (brokerSections are the broker part's) and
// adoptSections those of an adoption mapping.
var (
	relaySections = []string{"database", "forwarder", "http", "log"}
	adoptSections = []string{"schema", "table", "topic_template", "columns", "status"}
	// foreignSections are the top-level keys of YAML examples that are not outboxkit's files
	// (Prometheus' configuration in docs/observability.md).
	foreignSections = []string{"rule_files", "scrape_configs", "global", "alerting"}
)

// yamlBlock is one ```yaml block of a Markdown file.
var yamlBlock = regexp.MustCompile("(?ms)^```ya?ml[^\\n]*\\n(.*?)^```")

// docExample is one YAML example of the docs.
type docExample struct {
	where string // file:line
	text  string
	keys  []string // its top-level keys
}

// docExamples returns every ```yaml block of docs/*.md and README.md.
func docExamples(t *testing.T) []docExample {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(docsDir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(docsDir, "..", "README.md"))
	var out []docExample
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range yamlBlock.FindAllSubmatchIndex(data, -1) {
			ex := docExample{where: filepath.Base(f) + ":" + strconv.Itoa(1+strings.Count(string(data[:m[0]]), "\n")),
				text: string(data[m[2]:m[3]])}
			var top map[string]yaml.Node
			if err := yaml.Unmarshal([]byte(ex.text), &top); err != nil {
				t.Errorf("%s: the example is not a YAML mapping: %v", ex.where, err)
				continue
			}
			for k := range top {
				ex.keys = append(ex.keys, k)
			}
			slices.Sort(ex.keys)
			out = append(out, ex)
		}
	}
	return out
}

// fileKey is a key of a file path with its absolute path, as the examples write them.
var fileKey = regexp.MustCompile(`(?m)^(\s*\w+_file:\s*)(/\S+)`)

// withFiles returns the example with each absolute path of a *_file key moved under a
// temporary directory where the test creates the file: the loader checks that such files are
// readable, and the examples name files of the reader's machine (/etc/kafka/ca.pem).
func withFiles(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	return fileKey.ReplaceAllStringFunc(text, func(line string) string {
		m := fileKey.FindStringSubmatch(line)
		path := filepath.Join(dir, m[2])
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("placeholder"), 0o600); err != nil {
			t.Fatal(err)
		}
		return m[1] + path
	})
}

// allIn reports whether every key is one of sets' keys.
func allIn(keys []string, sets ...[]string) bool {
	for _, k := range keys {
		if !slices.ContainsFunc(sets, func(s []string) bool { return slices.Contains(s, k) }) {
			return false
		}
	}
	return true
}

// TestDocsYAMLExamplesLoad: every YAML example of docs/*.md and README.md is accepted by the
// loader of the file it shows: a relay configuration (or a part of one) by Parse, with the broker
// part and CheckRelay when it has one, and an adoption mapping by ParseAdopt. An example the
// loader refuses is a trap for whoever copies it. A part is completed as the rest of a file
// would be, by environment variables and only where it has no key of its own: without a database
// section, OUTBOXKIT_DATABASE_DIALECT and OUTBOXKIT_DATABASE_DSN; with broker sections but no
// broker key (a schema_registry section alone), OUTBOXKIT_BROKER=kafka and OUTBOXKIT_KAFKA_BROKERS.
// A YAML block of another kind fails the test until it is added here, so no example goes
// unchecked by omission.
func TestDocsYAMLExamplesLoad(t *testing.T) {
	examples := docExamples(t)
	if len(examples) == 0 {
		t.Fatalf("no YAML example found under %s", docsDir)
	}
	brokerSections := brokerSections()
	var relay, adopt, foreign int
	for _, ex := range examples {
		switch {
		case allIn(ex.keys, relaySections, brokerSections):
			relay++
			withBroker := slices.ContainsFunc(ex.keys, func(k string) bool { return slices.Contains(brokerSections, k) })
			rest := map[string]string{}
			if !slices.Contains(ex.keys, "database") {
				rest[EnvDatabaseDialect], rest[EnvDatabaseDSN] = "postgres", "postgres://relay@db:5432/app"
			}
			if withBroker && !slices.Contains(ex.keys, "broker") {
				rest[brokerconfig.EnvBroker], rest["OUTBOXKIT_KAFKA_BROKERS"] = "kafka", "kafka-1:9092"
			}
			lookup := func(name string) (string, bool) { v, ok := rest[name]; return v, ok }
			cfg, err := Parse([]byte(withFiles(t, ex.text)), lookup, Options{Broker: withBroker})
			if err == nil && withBroker {
				err = CheckRelay(cfg, lookup)
			}
			if err != nil {
				t.Errorf("%s: the relay refuses the example: %v\n%s", ex.where, err, ex.text)
			}
		case allIn(ex.keys, adoptSections):
			adopt++
			if _, err := ParseAdopt([]byte(ex.text)); err != nil {
				t.Errorf("%s: outboxkit adopt refuses the mapping: %v\n%s", ex.where, err, ex.text)
			}
		case allIn(ex.keys, foreignSections):
			foreign++
		default:
			t.Errorf("%s: a YAML example with keys %v is neither a relay configuration nor an adoption mapping: "+
				"add its kind to TestDocsYAMLExamplesLoad", ex.where, ex.keys)
		}
	}
	t.Logf("%d YAML examples: %d relay configurations, %d adoption mappings, %d of other programs", len(examples), relay, adopt, foreign)
	if relay == 0 || adopt == 0 {
		t.Errorf("found %d relay configurations and %d adoption mappings: the docs have both", relay, adopt)
	}
}
