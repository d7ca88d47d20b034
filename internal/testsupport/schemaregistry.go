package testsupport

import (
	"context"
	"net/http"
	"testing"
)

// EnvSchemaRegistryURL is the environment variable naming the base URL of the Confluent-compatible
// schema registry started by scripts/services.sh (Apicurio Registry, its /apis/ccompat/v7 API);
// DefaultSchemaRegistryURL is that script's default.
const (
	EnvSchemaRegistryURL     = "OUTBOXKIT_TEST_SCHEMA_REGISTRY_URL"
	DefaultSchemaRegistryURL = "http://127.0.0.1:18081/apis/ccompat/v7"
)

// SchemaRegistryURL returns the base URL of the test schema registry after checking that it
// answers the Confluent-compatible API (GET /subjects).
func SchemaRegistryURL(t testing.TB) string {
	t.Helper()
	base := env(EnvSchemaRegistryURL, DefaultSchemaRegistryURL)
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/subjects", nil)
	if err != nil {
		t.Fatalf("%s=%q is not a URL: %v", EnvSchemaRegistryURL, base, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		Unavailable(t, "the schema registry ("+EnvSchemaRegistryURL+")", err)
		return base
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the schema registry at %s answered GET /subjects with %s", base, resp.Status)
	}
	return base
}
