package charttest

import (
	"path/filepath"
	"strings"
	"testing"
)

// kubeVersions are the Kubernetes versions every rendering is validated against: the oldest
// and the newest whose schemas kubernetes-validate bundles and the chart supports.
var kubeVersions = []string{"1.30.0", "1.37.0"}

// valuesCase is one values file the chart is rendered with.
type valuesCase struct {
	Name string // "default" or the ci/ file's name without -values.yaml
	File string // "" for the chart's defaults
}

// requiredCases are the values files the chart must keep covering.
var requiredCases = []string{"kafka-sasl", "pulsar-token", "nats", "rabbitmq", "exactly-once"}

// cases returns the default values and every ci/*-values.yaml of the chart.
func cases(t *testing.T) []valuesCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := []valuesCase{{Name: "default"}}
	have := map[string]bool{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), "-values.yaml")
		have[name] = true
		out = append(out, valuesCase{Name: name, File: f})
	}
	for _, want := range requiredCases {
		if !have[want] {
			t.Fatalf("%s/ci/%s-values.yaml is missing", chartDir, want)
		}
	}
	return out
}
