package monitoring

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPromtoolCheckRules: the committed alert rules are valid Prometheus rules.
func TestPromtoolCheckRules(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := promtool(t).CheckRules(ctx, deployPath(t, "prometheus", "outboxkit-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out)
}

// TestPromtoolTestRules runs the committed unit tests of the alert rules (input series,
// expected alerts with their labels and annotations).
func TestPromtoolTestRules(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := deployPath(t, "prometheus")
	out, err := promtool(t).TestRules(ctx, dir, filepath.Join(dir, "outboxkit-rules.test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules did not report SUCCESS:\n%s", out)
	}
	t.Log(out)
}

// TestPrometheusConfigIsValid checks docker-compose's Prometheus configuration with
// `promtool check config`, its rule file path pointed at the repository's copy.
func TestPrometheusConfigIsValid(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data, err := os.ReadFile(deployPath(t, "prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	const mounted = "/etc/prometheus/rules/outboxkit-rules.yml"
	if !strings.Contains(string(data), mounted) {
		t.Fatalf("deploy/prometheus/prometheus.yml does not load %s", mounted)
	}
	local := strings.ReplaceAll(string(data), mounted, deployPath(t, "prometheus", "outboxkit-rules.yml"))
	path := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(path, []byte(local), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := promtool(t).CheckConfig(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out)
}

// TestOverrideRules: the test copy of the rules changes only the named thresholds and
// durations, and refuses an override that does not match the committed rules.
func TestOverrideRules(t *testing.T) {
	t.Parallel()
	src := []byte(`groups:
  - name: g
    rules:
      - alert: Old
        expr: max by (table) (age) > 300
        for: 1m
        labels: {severity: critical}
      - alert: Other
        expr: x > 300
        for: 5m
`)
	out, err := OverrideRules(src, map[string]Override{"Old": {Replace: map[string]string{"> 300": "> 8"}, For: "3s"}})
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, want := range []string{"expr: max by (table) (age) > 8", "for: 3s", "expr: x > 300", "for: 5m", "severity: critical"} {
		if !strings.Contains(got, want) {
			t.Errorf("overridden rules lack %q:\n%s", want, got)
		}
	}
	bad := map[string]map[string]Override{
		"unknown alert":       {"Missing": {For: "1s"}},
		"substring not found": {"Old": {Replace: map[string]string{"> 600": "> 8"}}},
		"substring twice":     {"Old": {Replace: map[string]string{"a": "b"}}},
		"no for":              {"Other": {For: "1s"}, "Old": {For: ""}},
	}
	noFor := []byte("groups:\n  - name: g\n    rules:\n      - alert: Other\n        expr: x > 1\n")
	for name, ov := range bad {
		in := src
		if name == "no for" {
			in = noFor
			delete(ov, "Old")
		}
		if _, err := OverrideRules(in, ov); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
