package testsupport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestSchemaRegistryRoundTrip registers an Avro schema by subject in the test registry through
// franz-go's registry client, fetches it back by the id the registry gave, and checks that the
// server is Apicurio Registry (its own API beside the Confluent-compatible one), not a stand-in.
func TestSchemaRegistryRoundTrip(t *testing.T) {
	base := testsupport.SchemaRegistryURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cl, err := sr.NewClient(sr.URLs(base))
	if err != nil {
		t.Fatalf("registry client: %v", err)
	}
	subject := testsupport.UniqueName("smoke") + "-value"
	const avsc = `{"type":"record","name":"Order","namespace":"outboxkit.smoke",` +
		`"fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"}]}`
	registered, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: avsc, Type: sr.TypeAvro})
	if err != nil {
		t.Fatalf("register %s: %v", subject, err)
	}
	if registered.ID <= 0 || registered.Version != 1 || registered.Subject != subject {
		t.Fatalf("registered %+v, want an id, version 1 and subject %s", registered, subject)
	}

	byID, err := cl.SchemaByID(ctx, registered.ID)
	if err != nil {
		t.Fatalf("schema by id %d: %v", registered.ID, err)
	}
	if got := compactJSON(t, byID.Schema); got != compactJSON(t, avsc) {
		t.Fatalf("schema %d is %s, want %s", registered.ID, got, avsc)
	}
	latest, err := cl.SchemaByVersion(ctx, subject, -1)
	if err != nil {
		t.Fatalf("latest of %s: %v", subject, err)
	}
	if latest.ID != registered.ID || latest.Version != 1 {
		t.Fatalf("latest of %s is id %d version %d, want id %d version 1", subject, latest.ID, latest.Version, registered.ID)
	}

	info := systemInfo(ctx, t, strings.TrimSuffix(base, "/apis/ccompat/v7")+"/apis/registry/v2/system/info")
	if info.Name != "apicurio-registry" {
		t.Fatalf("the registry says it is %q, want apicurio-registry", info.Name)
	}
	t.Logf("registry: %s %s; subject %s id %d", info.Name, info.Version, subject, registered.ID)
}

type registryInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

func systemInfo(ctx context.Context, t *testing.T, url string) registryInfo {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var info registryInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatalf("GET %s: %s, body not JSON: %v", url, resp.Status, err)
	}
	return info
}

func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %q: %v", s, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSchemaRegistryTakesConcurrentRegistrations registers new subjects, and a second version of
// each, from several goroutines at once, as parallel test packages do: every registration
// succeeds. With several request threads Apicurio 2.4's H2 storage answered some with 500 (a
// lock timeout on its sequences row) or refused a new subject as "already exists"; with one
// storage connection a second version waited for a connection that never came
// (scripts/services/apicurio.sh).
func TestSchemaRegistryTakesConcurrentRegistrations(t *testing.T) {
	base := testsupport.SchemaRegistryURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, err := sr.NewClient(sr.URLs(base), sr.HTTPClient(&http.Client{Timeout: 2 * time.Minute}))
	if err != nil {
		t.Fatalf("registry client: %v", err)
	}
	const writers, each = 8, 5
	prefix := testsupport.UniqueName("concurrent")
	errs := make(chan error, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				subject := fmt.Sprintf("%s_%d_%d-value", prefix, w, i)
				avsc := fmt.Sprintf(`{"type":"record","name":"R%d_%d","fields":[{"name":"id","type":"string"}]}`, w, i)
				if _, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: avsc, Type: sr.TypeAvro}); err != nil {
					errs <- fmt.Errorf("register %s: %w", subject, err)
					continue
				}
				// A second, compatible version of the subject: the registry takes a second
				// storage connection for it while holding one.
				v2 := strings.Replace(avsc, `]}`, `,{"name":"note","type":["null","string"],"default":null}]}`, 1)
				if _, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: v2, Type: sr.TypeAvro}); err != nil {
					errs <- fmt.Errorf("register version 2 of %s: %w", subject, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
