package charttest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
)

// crdKinds are the Prometheus Operator kinds: kubernetes-validate has no schema for them, so
// TestPrometheusOperatorObjects checks them.
var crdKinds = map[string]bool{"ServiceMonitor": true, "PrometheusRule": true}

// kubernetesValidate returns the kubernetes-validate command of the project's Python
// environment (scripts/python-env.sh installs it from PyPI; its schemas are bundled, so it runs
// offline).
func kubernetesValidate(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("bash", "../../../scripts/python-env.sh")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/python-env.sh: %v\n%s", err, stderr.String())
	}
	bin := filepath.Join(strings.TrimSpace(string(out)), "bin", "kubernetes-validate")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the Python environment has no kubernetes-validate: %v", err)
	}
	return bin
}

// TestRenderedObjectsMatchKubernetesSchemas renders the chart for every values case and
// Kubernetes version, and validates every object (hooks included) against that version's
// schemas in strict mode (an unknown field is an error).
func TestRenderedObjectsMatchKubernetesSchemas(t *testing.T) {
	bin := kubernetesValidate(t)
	dir := t.TempDir()
	for _, kv := range kubeVersions {
		var files []string
		kinds := map[string]int{}
		for _, c := range cases(t) {
			r := render(t, kv, readValues(t, c.File))
			var core []object
			for _, o := range r.Objects {
				if !crdKinds[o.kind()] {
					core = append(core, o)
					kinds[o.kind()]++
				}
			}
			f := filepath.Join(dir, kv+"-"+c.Name+".yaml")
			if err := os.WriteFile(f, manifest(t, core), 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		for _, want := range []string{"ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "Job"} {
			if kinds[want] == 0 {
				t.Fatalf("kubernetes %s: no %s was rendered in any case", kv, want)
			}
		}
		args := append([]string{"--strict", "--kubernetes-version", kv}, files...)
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubernetes-validate %s: %v\n%s", kv, err, out)
		}
		// A kind without a schema is only a warning for kubernetes-validate: here it is a failure.
		if bytes.Contains(out, []byte("WARN")) || bytes.Contains(out, []byte("ERROR")) {
			t.Fatalf("kubernetes-validate %s:\n%s", kv, out)
		}
		t.Logf("kubernetes %s: %d files, objects %v valid (strict)", kv, len(files), kinds)
	}
}

// TestKubernetesValidateRejectsAnUnknownField is the negative control of the schema check: an
// object with a misspelled field fails strict validation.
func TestKubernetesValidateRejectsAnUnknownField(t *testing.T) {
	bin := kubernetesValidate(t)
	r := render(t, kubeVersions[0], common.Values{})
	dep := r.find(t, "Deployment", "")
	spec := dep.Doc["spec"].(map[string]any)
	spec["replica"] = 2 // not a field of DeploymentSpec
	f := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(f, manifest(t, []object{dep}), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--strict", "--kubernetes-version", kubeVersions[0], f).CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("replica")) {
		t.Fatalf("kubernetes-validate accepted spec.replica (err %v):\n%s", err, out)
	}
}

// TestChartLint runs Helm's chart linter (helm lint --strict) for every values case.
func TestChartLint(t *testing.T) {
	for _, c := range cases(t) {
		kv, err := common.ParseKubeVersion(kubeVersions[len(kubeVersions)-1])
		if err != nil {
			t.Fatal(err)
		}
		res := lint.RunAll(chartDir, readValues(t, c.File), releaseNamespace, lint.WithKubeVersion(kv))
		for _, m := range res.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: helm lint: %s", c.Name, m)
			}
		}
	}
}
