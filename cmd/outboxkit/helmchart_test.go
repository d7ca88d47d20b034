package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"gopkg.in/yaml.v3"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
	"github.com/outboxkit/outboxkit/outbox"
)

// chartRelayInputs is the folder where deploy/helm/test (a module of its own, which renders the
// Helm chart with Helm's library) writes what the chart hands the relay per values case, and
// checks it is current. This module reads it, because the relay's configuration loader is
// internal to cmd/outboxkit and Helm's dependencies stay out of the library's module graph.
const chartRelayInputs = "../../deploy/helm/test/testdata/relay-inputs"

// helmRelayInputs mirrors deploy/helm/test's relayInputs.
type helmRelayInputs struct {
	Config      string            `yaml:"config"`
	ConfigPath  string            `yaml:"configPath"`
	RelayArgs   []string          `yaml:"relayArgs"`
	MigrateArgs []string          `yaml:"migrateArgs"`
	SecretEnv   []string          `yaml:"secretEnv"`
	Env         map[string]string `yaml:"env"`
	Mounts      []string          `yaml:"mounts"`
	Liveness    struct {
		Path string `yaml:"path"`
		Port int    `yaml:"port"`
	} `yaml:"liveness"`
	Readiness struct {
		Path string `yaml:"path"`
		Port int    `yaml:"port"`
	} `yaml:"readiness"`
	AdminPort    int      `yaml:"adminPort"`
	ServiceHosts []string `yaml:"serviceHosts"`
}

// sampleSecret is a value for a secret variable the chart maps from the Secret.
func sampleSecret(name string, dialect outbox.Dialect) string {
	switch {
	case name == relayconfig.EnvDatabaseDSN && dialect == outbox.MySQL:
		return "relay:s3cr3t@tcp(mariadb:3306)/shop"
	case name == relayconfig.EnvDatabaseDSN:
		return "postgres://relay:s3cr3t@postgres:5432/shop"
	case name == "OUTBOXKIT_RABBITMQ_AMQP_URL":
		return "amqp://relay:s3cr3t@rabbitmq:5672/"
	case strings.HasPrefix(name, "OUTBOXKIT_ADMIN_"):
		kind := strings.ToLower(strings.TrimPrefix(name, "OUTBOXKIT_ADMIN_"))
		return kind + ":s3cr3t-" + kind + "-0123456789abcdef"
	}
	return "s3cr3t"
}

// TestHelmChartRelayInputs: for every values case of the Helm chart, the relay accepts what the
// chart hands it: its configuration loader (with the broker part) and relay check accept the
// ConfigMap's file with the Secret's variables, every variable is one the relay reads, the
// migrate Job's arguments run (--print: no database), the probes' port is the one the
// configuration listens on, and the relay's server answers the probes' paths (/livez 200, and
// /readyz 503 until the relay runs, then 200). With the admin API on, the admin routes listen
// on the Service's admin port alone (TLS when the chart mounts the files) and answer the
// Service's DNS names, not another name (421).
func TestHelmChartRelayInputs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartRelayInputs, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 6 {
		t.Fatalf("%s has %d cases, want the default values and at least 5 values files", chartRelayInputs, len(files))
	}
	known := append(relayconfig.EnvNames(), brokerconfig.EnvNames()...)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var in helmRelayInputs
			if err := yaml.Unmarshal(data, &in); err != nil {
				t.Fatal(err)
			}
			var dialect struct {
				Database struct{ Dialect string } `yaml:"database"`
			}
			if err := yaml.Unmarshal([]byte(in.Config), &dialect); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{}
			for _, name := range in.SecretEnv {
				env[name] = sampleSecret(name, outbox.Dialect(dialect.Database.Dialect))
			}
			for name, v := range in.Env {
				env[name] = v
			}
			for name := range env {
				if !slices.Contains(known, name) {
					t.Errorf("the chart sets %s, which the relay does not read", name)
				}
			}
			in.Config = mountFiles(t, in)
			lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
			cfg, err := relayconfig.Parse([]byte(in.Config), lookup, relayconfig.Options{Broker: true})
			if err != nil {
				t.Fatalf("the relay refuses the chart's configuration: %v\n%s", err, in.Config)
			}
			if err := relayconfig.CheckRelay(cfg, lookup); err != nil {
				t.Fatal(err)
			}
			if want := []string{"relay", "--config", in.ConfigPath}; !slices.Equal(in.RelayArgs, want) {
				t.Errorf("relay args %v, want %v", in.RelayArgs, want)
			}
			_, port, err := net.SplitHostPort(cfg.HTTP.Listen)
			if err != nil {
				t.Fatal(err)
			}
			if p := strconv.Itoa(in.Liveness.Port); p != port || in.Readiness.Port != in.Liveness.Port {
				t.Errorf("probes on ports %d and %d, but http.listen is %s", in.Liveness.Port, in.Readiness.Port, cfg.HTTP.Listen)
			}
			checkAdminPort(t, cfg, in)
			if len(in.MigrateArgs) > 0 {
				checkMigrateArgs(t, in, env)
			}
			checkProbes(t, cfg, in, env)
		})
	}
}

// checkAdminPort checks that the Service's admin port is http.admin_listen's, apart from the
// probes' port, and that http.allowed_hosts holds the Service's DNS names.
func checkAdminPort(t *testing.T, cfg relayconfig.Config, in helmRelayInputs) {
	t.Helper()
	if (in.AdminPort != 0) != (cfg.HTTP.AdminListen != "") {
		t.Fatalf("the Service's admin port reaches %d, but http.admin_listen is %q", in.AdminPort, cfg.HTTP.AdminListen)
	}
	if in.AdminPort == 0 {
		return
	}
	_, port, err := net.SplitHostPort(cfg.HTTP.AdminListen)
	if err != nil {
		t.Fatal(err)
	}
	if port != strconv.Itoa(in.AdminPort) || in.AdminPort == in.Liveness.Port {
		t.Errorf("http.admin_listen %s, admin port %d, probes on %d: want the admin routes on a port of their own",
			cfg.HTTP.AdminListen, in.AdminPort, in.Liveness.Port)
	}
	if len(in.ServiceHosts) != 4 {
		t.Fatalf("serviceHosts %v: want the Service's four DNS names", in.ServiceHosts)
	}
	for _, h := range in.ServiceHosts {
		if !slices.Contains(cfg.HTTP.AllowedHosts, h) {
			t.Errorf("http.allowed_hosts %v lacks the Service's name %s", cfg.HTTP.AllowedHosts, h)
		}
	}
}

// mountFiles checks that every file the configuration names (keys ending in _file) is on a
// volume the chart mounts, and returns the configuration with each mount's folder replaced by
// a temporary one holding those files (empty), as the volume would.
func mountFiles(t *testing.T, in helmRelayInputs) string {
	t.Helper()
	var doc any
	if err := yaml.Unmarshal([]byte(in.Config), &doc); err != nil {
		t.Fatal(err)
	}
	var files []string
	var walk func(v any)
	walk = func(v any) {
		if m, ok := v.(map[string]any); ok {
			for k, child := range m {
				if s, ok := child.(string); ok && strings.HasSuffix(k, "_file") && s != "" {
					files = append(files, s)
				}
				walk(child)
			}
		}
	}
	walk(doc)
	config := in.Config
	for _, m := range in.Mounts {
		dir := t.TempDir()
		for _, f := range files {
			if rel, ok := strings.CutPrefix(f, m+"/"); ok {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, rel), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		config = strings.ReplaceAll(config, m+"/", dir+"/")
	}
	for _, f := range files {
		if !slices.ContainsFunc(in.Mounts, func(m string) bool { return strings.HasPrefix(f, m+"/") }) {
			t.Errorf("the configuration names %s, which is on no volume the chart mounts (%v)", f, in.Mounts)
		}
	}
	return config
}

// checkMigrateArgs runs the migrate Job's arguments, with --print so no database is needed.
func checkMigrateArgs(t *testing.T, in helmRelayInputs, env map[string]string) {
	t.Helper()
	dir := writeConfig(t, in.Config)
	args := slices.Clone(in.MigrateArgs)
	i := slices.Index(args, in.ConfigPath)
	if i < 0 || args[0] != "migrate" {
		t.Fatalf("migrate args %v do not read %s", args, in.ConfigPath)
	}
	args[i] = filepath.Join(dir, "outboxkit.yaml")
	var vars []string
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	res := cliWithInput(t, dir, "", vars, append(args, "--print")...)
	if res.code != 0 || !strings.Contains(res.stdout, "CREATE TABLE") {
		t.Fatalf("outboxkit %v --print: %s", args, res)
	}
}

// checkProbes serves the relay's endpoints for cfg (on a free port of the loopback) and gets the
// probes' paths.
func checkProbes(t *testing.T, cfg relayconfig.Config, in helmRelayInputs, env map[string]string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v) // the admin API reads its token variables itself
	}
	cfg.HTTP.Listen = "127.0.0.1:0"
	var pki *testPKI
	if cfg.HTTP.AdminListen != "" {
		// The files are on the chart's volumes (mountFiles); here they hold a test certificate.
		cfg.HTTP.AdminListen = "127.0.0.1:0"
		if cfg.HTTP.AdminTLSCertFile != "" {
			pki = newTestPKI(t)
			cfg.HTTP.AdminTLSCertFile, cfg.HTTP.AdminTLSKeyFile = pki.certFile, pki.keyFile
			if cfg.HTTP.AdminClientCAFile != "" {
				cfg.HTTP.AdminClientCAFile = pki.caFile
			}
		}
	}
	db, err := openDB(relayconfig.Database{Dialect: outbox.SQLite, DSN: filepath.Join(t.TempDir(), "probe.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var (
		logs      bytes.Buffer
		running   atomic.Bool
		publisher atomic.Pointer[message.Publisher]
	)
	stop, err := startRelayHTTP(cfg, db, newRegistry(), &running, &publisher, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	base := "http://" + servedAddr(t, &logs, "serving /metrics and /healthz")
	if code, body := httpGet(t, base+in.Liveness.Path); code != 200 {
		t.Errorf("GET %s: %d %s", in.Liveness.Path, code, body)
	}
	if code, body := httpGet(t, base+in.Readiness.Path); code != 503 {
		t.Errorf("GET %s before the relay runs: %d %s, want 503", in.Readiness.Path, code, body)
	}
	running.Store(true)
	if code, body := httpGet(t, base+in.Readiness.Path); code != 200 {
		t.Errorf("GET %s while the relay runs: %d %s", in.Readiness.Path, code, body)
	}
	if cfg.HTTP.AdminListen != "" {
		checkAdminListener(t, cfg, in, pki, base, servedAddr(t, &logs, "serving the admin API and console"))
		if pki != nil && strings.Contains(logs.String(), "without TLS") {
			t.Errorf("a warning about a plain admin port with TLS configured:\n%s", logs.String())
		}
	}
}

// checkAdminListener gets the console's login page on the admin listener (over TLS with the
// test certificate, and a client certificate when the chart asks for them) by each of the
// Service's DNS names (200) and by another name (421), and checks the probes' listener serves
// no admin route.
func checkAdminListener(t *testing.T, cfg relayconfig.Config, in helmRelayInputs, pki *testPKI, plainBase, admin string) {
	t.Helper()
	if code, body := httpGet(t, plainBase+"/console/login"); code != http.StatusNotFound {
		t.Errorf("GET /console/login on the probes' port: %d %s, want 404", code, body)
	}
	client, base := &http.Client{Timeout: time.Minute}, "http://"+admin
	if pki != nil {
		var cert *tls.Certificate
		if cfg.HTTP.AdminClientCAFile != "" {
			cert = &pki.client
		}
		client, base = tlsClient(pki, cert), "https://"+admin
	}
	hosts := map[string]int{"relay.attacker.example": http.StatusMisdirectedRequest}
	for _, h := range in.ServiceHosts {
		hosts[h] = http.StatusOK
	}
	for host, want := range hosts {
		req, err := http.NewRequest(http.MethodGet, base+"/console/login", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s/console/login as %s: %v", base, host, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s/console/login with Host %s: %d, want %d", base, host, resp.StatusCode, want)
		}
	}
}

// servedAddr returns the address the relay's server logged it listens on in the record msg.
func servedAddr(t *testing.T, logs *bytes.Buffer, msg string) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(logs.Bytes()))
	for {
		var rec map[string]any
		if err := dec.Decode(&rec); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if addr, ok := rec["addr"].(string); ok && rec["msg"] == msg {
			return addr
		}
	}
	t.Fatalf("the relay's server logged no addr for %q:\n%s", msg, logs.String())
	return fmt.Sprint()
}

// TestHelmChartSecretVariablesAreTheRelays: every variable the Helm chart treats as a secret
// (refused in extraEnv with a value in clear) is one the relay reads, so a renamed variable
// cannot leave the chart guarding a name nobody uses.
func TestHelmChartSecretVariablesAreTheRelays(t *testing.T) {
	data, err := os.ReadFile("../../deploy/helm/outboxkit/templates/_helpers.tpl")
	if err != nil {
		t.Fatal(err)
	}
	_, def, ok := strings.Cut(string(data), `{{- define "outboxkit.secretVariables" -}}`)
	def, _, ok2 := strings.Cut(def, "{{- end -}}")
	if !ok || !ok2 {
		t.Fatal(`_helpers.tpl has no "outboxkit.secretVariables" definition`)
	}
	names := strings.Fields(def)
	known := append(relayconfig.EnvNames(), brokerconfig.EnvNames()...)
	for _, n := range names {
		if !slices.Contains(known, n) {
			t.Errorf("the chart's secret variable %s is not one the relay reads", n)
		}
	}
	for _, want := range []string{relayconfig.EnvDatabaseDSN, relayconfig.EnvAdminReadTokens, relayconfig.EnvAdminWriteTokens} {
		if !slices.Contains(names, want) {
			t.Errorf("the chart does not treat %s as a secret", want)
		}
	}
	if len(names) < 9 {
		t.Errorf("the chart's secret variables %v: want at least 9", names)
	}
}
