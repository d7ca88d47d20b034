package charttest

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// container returns the only container of a workload (Deployment or Job).
func container(t *testing.T, o object) map[string]any {
	t.Helper()
	cs := list(o.Doc, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("%s %s: want 1 container, have %d", o.kind(), o.name(), len(cs))
	}
	return cs[0].(map[string]any)
}

// containerPort resolves a probe's port (a number or a port name) on the container.
func containerPort(t *testing.T, c map[string]any, port any) int {
	t.Helper()
	if n, ok := port.(int); ok {
		return n
	}
	for _, p := range list(c, "ports") {
		if str(p, "name") == port {
			return at(p, "containerPort").(int)
		}
	}
	t.Fatalf("container %s has no port %v", str(c, "name"), port)
	return 0
}

// relayConfig returns the configuration file the container reads: the file its --config
// argument names, from the ConfigMap mounted at that file's folder.
func relayConfig(t *testing.T, r rendering, workload object) (path, data string) {
	t.Helper()
	c := container(t, workload)
	args := list(c, "args")
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--config" {
			path = args[i+1].(string)
		}
	}
	if path == "" {
		t.Fatalf("%s: the container has no --config argument: %v", workload.name(), args)
	}
	var volume string
	for _, m := range list(c, "volumeMounts") {
		if str(m, "mountPath")+"/" == path[:strings.LastIndex(path, "/")+1] {
			volume = str(m, "name")
		}
	}
	var cmName string
	for _, v := range list(workload.Doc, "spec", "template", "spec", "volumes") {
		if str(v, "name") == volume {
			cmName = str(v, "configMap", "name")
		}
	}
	if cmName == "" {
		t.Fatalf("%s: no ConfigMap volume is mounted at %s", workload.name(), path)
	}
	for _, o := range r.all("ConfigMap") {
		if o.name() == cmName {
			data = str(o.Doc, "data", path[strings.LastIndex(path, "/")+1:])
		}
	}
	if data == "" {
		t.Fatalf("%s: ConfigMap %s has no key for %s", workload.name(), cmName, path)
	}
	return path, data
}

// httpSection is the http section of a relay configuration, as far as the chart sets it.
type httpSection struct {
	Listen            string   `yaml:"listen"`
	AdminListen       string   `yaml:"admin_listen"`
	AdminTLSCertFile  string   `yaml:"admin_tls_cert_file"`
	AdminTLSKeyFile   string   `yaml:"admin_tls_key_file"`
	AdminClientCAFile string   `yaml:"admin_client_ca_file"`
	AllowedHosts      []string `yaml:"allowed_hosts"`
}

// httpOf decodes the http section of a relay configuration.
func httpOf(t *testing.T, config string) httpSection {
	t.Helper()
	var cfg struct {
		HTTP httpSection `yaml:"http"`
	}
	if err := yaml.Unmarshal([]byte(config), &cfg); err != nil {
		t.Fatalf("the relay configuration is not YAML: %v\n%s", err, config)
	}
	return cfg.HTTP
}

// portOf is the port of a ":port" or "host:port" address of key.
func portOf(t *testing.T, key, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s %q: %v", key, addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("%s %q: %v", key, addr, err)
	}
	return n
}

// listenPort is the port of the relay configuration's http.listen.
func listenPort(t *testing.T, config string) int {
	t.Helper()
	return portOf(t, "http.listen", httpOf(t, config).Listen)
}

// TestProbesPointAtTheRelaysListener: the liveness probe is GET /livez and the readiness probe
// GET /readyz, on the port the relay's configuration listens on (cmd/outboxkit's
// TestHelmChartRelayInputs checks the relay answers both there); the Service and the
// ServiceMonitor reach /metrics on that port, and the Service's admin port reaches
// http.admin_listen.
func TestProbesPointAtTheRelaysListener(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.Name, func(t *testing.T) {
			r := render(t, kubeVersions[0], readValues(t, c.File))
			dep := r.find(t, "Deployment", "")
			ctr := container(t, dep)
			_, config := relayConfig(t, r, dep)
			listen := listenPort(t, config)
			for probe, path := range map[string]string{"livenessProbe": "/livez", "readinessProbe": "/readyz"} {
				if got := str(ctr, probe, "httpGet", "path"); got != path {
					t.Errorf("%s path %q, want %q", probe, got, path)
				}
				if port := containerPort(t, ctr, at(ctr, probe, "httpGet", "port")); port != listen {
					t.Errorf("%s port %d, but the relay listens on %d", probe, port, listen)
				}
			}
			svc := r.find(t, "Service", "")
			admin := -1
			if h := httpOf(t, config); h.AdminListen != "" {
				admin = portOf(t, "http.admin_listen", h.AdminListen)
			}
			for _, p := range list(svc.Doc, "spec", "ports") {
				want := listen
				if str(p, "name") == "admin" {
					want = admin
				}
				if port := containerPort(t, ctr, at(p, "targetPort")); port != want {
					t.Errorf("Service port %s targets %d, but the relay listens on %d for it", str(p, "name"), port, want)
				}
			}
			if !labelsSelect(at(svc.Doc, "spec", "selector"), at(dep.Doc, "spec", "template", "metadata", "labels")) {
				t.Errorf("the Service's selector does not select the relay pods")
			}
			for _, job := range r.all("Job") {
				if labelsSelect(at(svc.Doc, "spec", "selector"), at(job.Doc, "spec", "template", "metadata", "labels")) {
					t.Errorf("the Service's selector also selects the migrate Job's pods")
				}
			}
			for _, sm := range r.all("ServiceMonitor") {
				ep := at(sm.Doc, "spec", "endpoints", 0)
				if str(ep, "path") != "/metrics" || str(ep, "port") != "http" {
					t.Errorf("ServiceMonitor endpoint %v, want port http path /metrics", ep)
				}
			}
		})
	}
}

// labelsSelect reports whether every label of selector is in labels.
func labelsSelect(selector, labels any) bool {
	sel, _ := selector.(map[string]any)
	lab, _ := labels.(map[string]any)
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if lab[k] != v {
			return false
		}
	}
	return true
}

// TestMigrateHookRunsBeforeTheRelays: `outboxkit migrate` runs as a pre-install and
// pre-upgrade hook Job, reading the same configuration and secrets as the relays from a hook
// ConfigMap created before it (the release's ConfigMap does not exist during pre-install).
func TestMigrateHookRunsBeforeTheRelays(t *testing.T) {
	r := render(t, kubeVersions[0], readValues(t, ""))
	job := r.find(t, "Job", "-migrate")
	hook := func(o object, key string) string { return str(o.Doc, "metadata", "annotations", "helm.sh/hook"+key) }
	if hook(job, "") != "pre-install,pre-upgrade" {
		t.Fatalf("migrate Job hook %q", hook(job, ""))
	}
	args := fmt.Sprint(list(container(t, job), "args"))
	if !strings.HasPrefix(args, "[migrate --config ") {
		t.Fatalf("migrate Job args %s", args)
	}
	_, jobConfig := relayConfig(t, r, job)
	_, relayConf := relayConfig(t, r, r.find(t, "Deployment", ""))
	if jobConfig != relayConf {
		t.Fatalf("the migrate Job's configuration differs from the relays':\n%s\n---\n%s", jobConfig, relayConf)
	}
	cm := r.find(t, "ConfigMap", "-migrate")
	if hook(cm, "") != hook(job, "") || atoi(t, hook(cm, "-weight")) >= atoi(t, hook(job, "-weight")) {
		t.Fatalf("the migrate ConfigMap must be a hook of the same events created before the Job (weights %s, %s)",
			hook(cm, "-weight"), hook(job, "-weight"))
	}
	if fmt.Sprint(at(container(t, job), "env")) != fmt.Sprint(at(container(t, r.find(t, "Deployment", "")), "env")) {
		t.Fatal("the migrate Job's environment differs from the relays'")
	}
	if str(job.Doc, "spec", "template", "spec", "restartPolicy") != "Never" {
		t.Fatal("the migrate Job's pods must not restart in place (backoffLimit retries them)")
	}
	off := render(t, kubeVersions[0], readValues(t, chartDir+"/ci/rabbitmq-values.yaml"))
	if len(off.all("Job")) != 0 {
		t.Fatal("migrate.enabled=false still renders a Job")
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// TestSecurityContext: every pod runs as a numeric non-root user with a read-only root
// filesystem, no privilege escalation, no capabilities, no service account token, and with
// resource requests and a memory limit.
func TestSecurityContext(t *testing.T) {
	for _, c := range cases(t) {
		r := render(t, kubeVersions[0], readValues(t, c.File))
		for _, kind := range []string{"Deployment", "Job"} {
			for _, w := range r.all(kind) {
				pod := at(w.Doc, "spec", "template", "spec")
				ctr := container(t, w)
				uid, _ := at(pod, "securityContext", "runAsUser").(int)
				checks := map[string]bool{
					"pod runAsNonRoot":                   at(pod, "securityContext", "runAsNonRoot") == true,
					"pod runAsUser non-zero":             uid > 0,
					"automountServiceAccountToken false": at(pod, "automountServiceAccountToken") == false,
					"container readOnlyRootFilesystem":   at(ctr, "securityContext", "readOnlyRootFilesystem") == true,
					"container allowPrivilegeEscalation": at(ctr, "securityContext", "allowPrivilegeEscalation") == false,
					"container drops ALL capabilities":   fmt.Sprint(at(ctr, "securityContext", "capabilities", "drop")) == "[ALL]",
					"container runAsNonRoot":             at(ctr, "securityContext", "runAsNonRoot") == true,
					"seccomp RuntimeDefault":             str(pod, "securityContext", "seccompProfile", "type") == "RuntimeDefault",
					"resources.requests.cpu and .memory": str(ctr, "resources", "requests", "cpu") != "" && str(ctr, "resources", "requests", "memory") != "",
					"resources.limits.memory":            str(ctr, "resources", "limits", "memory") != "",
				}
				for what, ok := range checks {
					if !ok {
						t.Errorf("%s: %s %s: %s", c.Name, kind, w.name(), what)
					}
				}
			}
		}
	}
}

// TestReplicasAndDisruptionBudget: replicaCount sets the Deployment's replicas, and the
// PodDisruptionBudget selects the relay pods (and not the migrate Job's).
func TestReplicasAndDisruptionBudget(t *testing.T) {
	vals := readValues(t, "")
	vals["replicaCount"] = 5
	r := render(t, kubeVersions[0], vals)
	dep := r.find(t, "Deployment", "")
	if at(dep.Doc, "spec", "replicas") != 5 {
		t.Fatalf("replicas %v, want 5", at(dep.Doc, "spec", "replicas"))
	}
	pdb := r.find(t, "PodDisruptionBudget", "")
	sel := at(pdb.Doc, "spec", "selector", "matchLabels")
	if !labelsSelect(sel, at(dep.Doc, "spec", "template", "metadata", "labels")) {
		t.Fatal("the PodDisruptionBudget does not select the relay pods")
	}
	job := r.find(t, "Job", "-migrate")
	if labelsSelect(sel, at(job.Doc, "spec", "template", "metadata", "labels")) {
		t.Fatal("the PodDisruptionBudget would count the migrate Job's pod")
	}
	if at(pdb.Doc, "spec", "maxUnavailable") != 1 {
		t.Fatalf("maxUnavailable %v", at(pdb.Doc, "spec", "maxUnavailable"))
	}
}
