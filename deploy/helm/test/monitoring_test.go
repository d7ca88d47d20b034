package charttest

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// testedRules is the alert rules file that internal/monitoring checks and unit-tests with
// promtool; the chart's files/outboxkit-rules.yml is a symbolic link to it.
const testedRules = "../../prometheus/outboxkit-rules.yml"

// TestPrometheusRuleCarriesTheTestedRules: the PrometheusRule's groups are exactly those of the
// tested rules file, and the ServiceMonitor gives the relays the job label the rules select.
func TestPrometheusRuleCarriesTheTestedRules(t *testing.T) {
	data, err := os.ReadFile(testedRules)
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Groups []any `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if len(want.Groups) == 0 {
		t.Fatalf("%s has no groups", testedRules)
	}
	if target, err := os.Readlink(chartDir + "/files/outboxkit-rules.yml"); err != nil || target != "../"+testedRules {
		t.Fatalf("files/outboxkit-rules.yml must link to %s (one file, not a copy): %q %v", testedRules, target, err)
	}
	r := render(t, kubeVersions[0], readValues(t, chartDir+"/ci/kafka-sasl-values.yaml"))
	rule := r.find(t, "PrometheusRule", "")
	if !reflect.DeepEqual(at(rule.Doc, "spec", "groups"), want.Groups) {
		t.Fatalf("the PrometheusRule's groups differ from %s", testedRules)
	}
	if !strings.Contains(string(data), `job="outboxkit-relay"`) {
		t.Fatalf("%s no longer selects job=\"outboxkit-relay\": update the ServiceMonitor's relabeling", testedRules)
	}
	sm := r.find(t, "ServiceMonitor", "")
	var job bool
	for _, rl := range list(sm.Doc, "spec", "endpoints", 0, "relabelings") {
		job = job || (str(rl, "targetLabel") == "job" && str(rl, "replacement") == "outboxkit-relay")
	}
	if !job {
		t.Fatal("the ServiceMonitor does not set job=outboxkit-relay, which the rules select")
	}
	for _, o := range []object{rule, sm} {
		if str(o.Doc, "apiVersion") != "monitoring.coreos.com/v1" || str(o.Doc, "metadata", "labels", "release") != "prometheus" {
			t.Errorf("%s: apiVersion %s, labels %v", o.kind(), str(o.Doc, "apiVersion"), at(o.Doc, "metadata", "labels"))
		}
	}
	if !labelsSelect(at(sm.Doc, "spec", "selector", "matchLabels"), at(r.find(t, "Service", "").Doc, "metadata", "labels")) {
		t.Fatal("the ServiceMonitor does not select the Service")
	}
	def := render(t, kubeVersions[0], readValues(t, ""))
	if len(def.all("PrometheusRule"))+len(def.all("ServiceMonitor")) != 0 {
		t.Fatal("the Prometheus Operator objects are rendered by default (they need its CRDs)")
	}
}
