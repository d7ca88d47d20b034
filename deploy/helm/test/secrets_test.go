package charttest

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"helm.sh/helm/v4/pkg/chart/common"
)

// secretKeys are the configuration keys whose values are secrets (brokerconfig marks their
// variables secret; database.dsn carries the database password).
var secretKeys = []string{"dsn", "password", "auth_token", "token"}

// TestSecretsNeverInTheConfigMap: for every case, no ConfigMap holds a secret key, and every
// secret variable reaches the containers only through a secretKeyRef to existingSecret.
func TestSecretsNeverInTheConfigMap(t *testing.T) {
	for _, c := range cases(t) {
		vals := readValues(t, c.File)
		r := render(t, kubeVersions[0], vals)
		for _, cm := range r.all("ConfigMap") {
			for file, data := range at(cm.Doc, "data").(map[string]any) {
				var doc any
				if err := yaml.Unmarshal([]byte(data.(string)), &doc); err != nil {
					t.Fatalf("%s: ConfigMap %s %s: %v", c.Name, cm.name(), file, err)
				}
				walkKeys(doc, "", func(path string) {
					for _, k := range secretKeys {
						if strings.HasSuffix(path, "."+k) {
							t.Errorf("%s: ConfigMap %s %s has the secret key %s", c.Name, cm.name(), file, path)
						}
					}
				})
			}
		}
		secretName := releaseName + "-outboxkit"
		if n := str(map[string]any(vals), "existingSecret", "name"); n != "" {
			secretName = n
		}
		mapped := map[string]any{"OUTBOXKIT_DATABASE_DSN": "database-dsn"}
		if m, ok := at(map[string]any(vals), "existingSecret", "env").(map[string]any); ok {
			mapped = m
		}
		for _, kind := range []string{"Deployment", "Job"} {
			for _, w := range r.all(kind) {
				env := map[string]any{}
				for _, e := range list(container(t, w), "env") {
					env[str(e, "name")] = e
				}
				for name, key := range mapped {
					ref := at(env[name], "valueFrom", "secretKeyRef")
					if str(ref, "name") != secretName || str(ref, "key") != key {
						t.Errorf("%s: %s %s: %s is %v, want secretKeyRef %s/%s", c.Name, kind, w.name(), name, env[name], secretName, key)
					}
				}
				if _, ok := env["OUTBOXKIT_DATABASE_DSN"]; !ok {
					t.Errorf("%s: %s %s does not set OUTBOXKIT_DATABASE_DSN", c.Name, kind, w.name())
				}
			}
		}
	}
}

// walkKeys calls f with the dotted path of every mapping key of doc.
func walkKeys(doc any, prefix string, f func(string)) {
	switch v := doc.(type) {
	case map[string]any:
		for k, child := range v {
			f(prefix + "." + k)
			walkKeys(child, prefix+"."+k, f)
		}
	case []any:
		for _, child := range v {
			walkKeys(child, prefix, f)
		}
	}
}

// TestSecretsInValuesAreRefused: a secret written into values fails the render with a message
// naming the key and the variable to map instead; so do the settings the chart owns.
func TestSecretsInValuesAreRefused(t *testing.T) {
	ch := loadChart(t)
	for _, tc := range []struct {
		name, values, want string
	}{
		{"database dsn", "config: {database: {dialect: postgres, dsn: 'postgres://u:s3cr3t@db/x'}}", "config.database.dsn"},
		{"kafka sasl password", "config: {kafka: {brokers: [k:9092], sasl: {mechanism: PLAIN, username: u, password: s3cr3t}}}", "OUTBOXKIT_KAFKA_SASL_PASSWORD"},
		{"pulsar token", "config: {broker: pulsar, pulsar: {url: 'pulsar://p:6650', auth_token: s3cr3t}}", "config.pulsar.auth_token"},
		{"nats password", "config: {broker: nats, nats: {urls: ['nats://n:4222'], username: u, password: s3cr3t}}", "config.nats.password"},
		{"nats token", "config: {broker: nats, nats: {urls: ['nats://n:4222'], token: s3cr3t}}", "OUTBOXKIT_NATS_TOKEN"},
		{"rabbitmq password", "config: {broker: rabbitmq, rabbitmq: {url: 'amqp://u@r:5672/', password: s3cr3t}}", "config.rabbitmq.password"},
		{"schema registry password", "config: {kafka: {brokers: [k:9092]}, schema_registry: {url: 'https://r', username: u, password: s3cr3t}}", "OUTBOXKIT_SCHEMA_REGISTRY_PASSWORD"},
		{"schema registry bearer token", "config: {kafka: {brokers: [k:9092]}, schema_registry: {url: 'https://r', bearer_token: s3cr3t}}", "config.schema_registry.bearer_token"},
		{"rabbitmq url with password", "config: {broker: rabbitmq, rabbitmq: {url: 'amqp://u:s3cr3t@r:5672/'}}", "config.rabbitmq.url"},
		{"secret in extraEnv", "extraEnv: [{name: OUTBOXKIT_KAFKA_SASL_PASSWORD, value: s3cr3t}]", "extraEnv OUTBOXKIT_KAFKA_SASL_PASSWORD"},
		{"http.listen", "config: {http: {listen: '0.0.0.0:1234'}}", "config.http.listen"},
		{"not a relay variable", "existingSecret: {env: {DATABASE_URL: dsn}}", "existingSecret.env DATABASE_URL"},
		{"admin without tokens", "admin: {enabled: true}", "admin.enabled"},
		{"admin tokens while off", "existingSecret: {env: {OUTBOXKIT_DATABASE_DSN: dsn, OUTBOXKIT_ADMIN_READ_TOKENS: t}}", "admin.enabled is false"},
		{"values schema", "replicaCount: two", "replicaCount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := common.ReadValues([]byte(tc.values))
			if err != nil {
				t.Fatal(err)
			}
			_, err = tryRender(ch, kubeVersions[0], vals)
			if err == nil {
				t.Fatalf("rendered with %s", tc.values)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Fatalf("error %q repeats the secret", err)
			}
		})
	}
}

// TestAdminAPIOffUnlessAsked: by default no admin token reaches the relay (the relay then
// answers 404 on /api/v1/) and the Service has no admin port; admin.enabled with tokens adds it.
func TestAdminAPIOffUnlessAsked(t *testing.T) {
	for _, c := range cases(t) {
		vals := readValues(t, c.File)
		r := render(t, kubeVersions[0], vals)
		enabled := at(map[string]any(vals), "admin", "enabled") == true
		var admin bool
		for _, p := range list(r.find(t, "Service", "").Doc, "spec", "ports") {
			admin = admin || str(p, "name") == "admin"
		}
		var tokens bool
		for _, e := range list(container(t, r.find(t, "Deployment", "")), "env") {
			tokens = tokens || strings.HasPrefix(str(e, "name"), "OUTBOXKIT_ADMIN_")
		}
		if admin != enabled || tokens != enabled {
			t.Errorf("%s: admin.enabled %v, but admin port %v and admin tokens %v", c.Name, enabled, admin, tokens)
		}
	}
}

// TestNotes: NOTES.txt names the Secret and its keys, and how to watch the rollout.
func TestNotes(t *testing.T) {
	r := render(t, kubeVersions[0], readValues(t, chartDir+"/ci/kafka-sasl-values.yaml"))
	for _, want := range []string{"Secret orders-relay", "OUTBOXKIT_KAFKA_SASL_PASSWORD <- key kafka-password",
		"rollout status deployment/orders-outboxkit", "orders-outboxkit-migrate"} {
		if !strings.Contains(r.Notes, want) {
			t.Errorf("NOTES.txt lacks %q:\n%s", want, r.Notes)
		}
	}
}
