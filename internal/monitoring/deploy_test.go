package monitoring

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// forwarderMetrics reads the metric names the forwarder registers from the files under forwarder/
// that set the namespace and subsystem (the names given to its counter and gauge helpers and to
// the Name fields), prefixed with that namespace and subsystem.
func forwarderMetrics(t *testing.T) map[string]bool {
	t.Helper()
	const scope = `Namespace: "outboxkit", Subsystem: "forwarder"`
	var src []byte
	err := filepath.WalkDir(filepath.Join(repoRoot(t), "forwarder"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(data), scope) {
			src = append(src, data...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	re := regexp.MustCompile(`(?:counter\(|gauge\(|Name:\s*)"([a-z_]+)"`)
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		names["outboxkit_forwarder_"+m[1]] = true
	}
	if len(names) < 10 {
		t.Fatalf("found only %d metric names in the forwarder's files that set %s (%v): update this test", len(names), scope, names)
	}
	return names
}

var referenced = regexp.MustCompile(`outboxkit_forwarder_[a-z_]+`)

// checkNames fails for every outboxkit_forwarder_* name in text that the forwarder does not
// export (histograms' _bucket, _sum and _count series count as their histogram's).
func checkNames(t *testing.T, what, text string, known map[string]bool) map[string]bool {
	t.Helper()
	used := map[string]bool{}
	for _, name := range referenced.FindAllString(text, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if !known[base] && strings.HasSuffix(name, suffix) {
				base = strings.TrimSuffix(name, suffix)
			}
		}
		if !known[base] {
			t.Errorf("%s uses %s, which the forwarder does not register", what, name)
			continue
		}
		used[base] = true
	}
	return used
}

// TestDashboardAndRulesUseTheForwardersMetrics: every forwarder metric name in the dashboard's
// queries and in the alert rules is one the forwarder registers, and the dashboard's panels
// cover the metrics the issue asks for.
func TestDashboardAndRulesUseTheForwardersMetrics(t *testing.T) {
	t.Parallel()
	known := forwarderMetrics(t)
	model, err := os.ReadFile(deployPath(t, "grafana", "dashboards", "outboxkit-relay.json"))
	if err != nil {
		t.Fatal(err)
	}
	queries, err := DashboardQueries(model)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, q := range queries {
		for name := range checkNames(t, "dashboard panel "+q.Panel, q.Expr, known) {
			used[name] = true
		}
	}
	for _, want := range []string{"pending_rows", "oldest_pending_age_seconds", "relayed_total", "commit_to_ack_seconds",
		"dead_rows", "owned_partitions", "failed_total", "dead_lettered_total", "fenced_rows_total", "gap_violations_total",
		"blocked_keys", "oldest_blocked_key_age_seconds"} {
		if !used["outboxkit_forwarder_"+want] {
			t.Errorf("no dashboard panel shows outboxkit_forwarder_%s", want)
		}
	}
	for name := range known {
		if !used[name] {
			t.Logf("note: the dashboard does not show %s", name)
		}
	}

	var uid struct {
		UID   string `json:"uid"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal(model, &uid); err != nil || uid.UID == "" || uid.Title == "" {
		t.Errorf("dashboard has no uid or title (%v)", err)
	}

	rules, err := os.ReadFile(deployPath(t, "prometheus", "outboxkit-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	checkNames(t, "outboxkit-rules.yml", string(rules), known)
}

// composeService is the part of a docker-compose service this test reads.
type composeService struct {
	Image     string                       `yaml:"image"`
	Command   []string                     `yaml:"command"`
	Volumes   []string                     `yaml:"volumes"`
	Ports     []string                     `yaml:"ports"`
	DependsOn map[string]map[string]string `yaml:"depends_on"`
}

// TestComposeRunsPrometheusAndGrafana checks what can be checked without Docker: the compose
// file parses, Prometheus mounts the committed configuration and rules where the configuration
// expects them and scrapes the relay service, Grafana mounts the provisioning files and the
// dashboard directory the dashboard provider reads, and every mounted file exists.
func TestComposeRunsPrometheusAndGrafana(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	mounts := func(service string) map[string]string {
		svc, ok := compose.Services[service]
		if !ok {
			t.Fatalf("docker-compose.yml has no %s service", service)
		}
		m := map[string]string{}
		for _, v := range svc.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				t.Errorf("%s volume %q is not host:container", service, v)
				continue
			}
			host := filepath.Join(root, parts[0])
			if _, err := os.Stat(host); err != nil {
				t.Errorf("%s mounts %s, which does not exist: %v", service, parts[0], err)
			}
			m[parts[1]] = filepath.Clean(parts[0])
		}
		return m
	}

	prom := mounts("prometheus")
	if got := prom["/etc/prometheus/prometheus.yml"]; got != "deploy/prometheus/prometheus.yml" {
		t.Errorf("prometheus mounts %q as its configuration", got)
	}
	if got := prom["/etc/prometheus/rules/outboxkit-rules.yml"]; got != "deploy/prometheus/outboxkit-rules.yml" {
		t.Errorf("prometheus mounts %q as its rules", got)
	}
	if !slices.Contains(compose.Services["prometheus"].Command, "--config.file=/etc/prometheus/prometheus.yml") {
		t.Errorf("prometheus command %v does not read /etc/prometheus/prometheus.yml", compose.Services["prometheus"].Command)
	}
	var promConfig struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, filepath.Join(root, "deploy", "prometheus", "prometheus.yml"), &promConfig)
	scrapesRelay := false
	for _, sc := range promConfig.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			if sc.JobName == "outboxkit-relay" && slices.Contains(st.Targets, "relay:9464") {
				scrapesRelay = true
			}
		}
	}
	if !scrapesRelay {
		t.Errorf("deploy/prometheus/prometheus.yml has no job outboxkit-relay scraping relay:9464 (the rules select job=\"outboxkit-relay\")")
	}
	if _, ok := compose.Services["relay"]; !ok {
		t.Error("docker-compose.yml has no relay service to scrape")
	}

	graf := mounts("grafana")
	for container, host := range map[string]string{
		"/etc/grafana/provisioning/datasources": "deploy/grafana/provisioning/datasources",
		"/etc/grafana/provisioning/dashboards":  "deploy/grafana/provisioning/dashboards",
		"/var/lib/grafana/dashboards":           "deploy/grafana/dashboards",
	} {
		if graf[container] != host {
			t.Errorf("grafana mounts %q at %s, want %s", graf[container], container, host)
		}
	}
	var provider struct {
		Providers []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, filepath.Join(root, "deploy", "grafana", "provisioning", "dashboards", "outboxkit.yml"), &provider)
	if len(provider.Providers) != 1 || provider.Providers[0].Type != "file" || provider.Providers[0].Options.Path != "/var/lib/grafana/dashboards" {
		t.Errorf("dashboard provider %+v does not read /var/lib/grafana/dashboards", provider.Providers)
	}
	var datasources struct {
		Datasources []struct {
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, filepath.Join(root, "deploy", "grafana", "provisioning", "datasources", "prometheus.yml"), &datasources)
	if len(datasources.Datasources) != 1 || datasources.Datasources[0].Type != "prometheus" ||
		datasources.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("datasources %+v: want one prometheus datasource at http://prometheus:9090", datasources.Datasources)
	}
}

func readYAML(t *testing.T, path string, out any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
