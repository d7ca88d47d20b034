package schema

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestServerErrorsAreBoundedPerSubject: the rule that tells a registry outage (no attempts) from
// a subject's failure (attempts spent), against the real registry behind a proxy that answers
// the status under test for the subject's requests, or for every request. A 503 (or 502, 504)
// is an outage however long it lasts; a 500 is an outage while the health check fails too, and
// while the subject's errors are younger than the bound; after that it is the subject's
// failure, and a successful lookup starts the clock again.
func TestServerErrorsAreBoundedPerSubject(t *testing.T) {
	_, _, topic, _ := registry(t)
	subject := Subject(topic)
	base, err := url.Parse(testsupport.SchemaRegistryURL(t))
	if err != nil {
		t.Fatal(err)
	}
	var status atomic.Int32 // answered for the subject's requests; 0: pass
	var all atomic.Bool     // answer status for every request, the health check's too
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: base.Scheme, Host: base.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := int(status.Load()); s != 0 && (all.Load() || strings.Contains(r.URL.Path, "/subjects/"+subject+"/")) {
			w.WriteHeader(s)
			_, _ = w.Write([]byte(`{"error_code":50001,"message":"injected"}`))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cl, err := sr.NewClient(sr.URLs(srv.URL + base.Path))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := NewEncoder(cl, Config{LatestTTL: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(0, 0)
	se := &serverErrors{bound: time.Minute, client: cl, now: func() time.Time { return clock }}
	ctx := context.Background()
	unavailable := func() bool {
		t.Helper()
		_, err := enc.lookup(ctx, target{subject: subject})
		if err == nil {
			se.ok(subject)
			return false
		}
		var re *RegistryError
		if !errors.As(se.classify(ctx, err), &re) {
			t.Fatalf("lookup: %v, want a *RegistryError", err)
		}
		return re.Unavailable()
	}

	status.Store(http.StatusServiceUnavailable)
	if !unavailable() {
		t.Fatal("503 for the subject: not an outage")
	}
	clock = clock.Add(time.Hour)
	if !unavailable() {
		t.Fatal("503 for the subject for an hour: not an outage")
	}

	status.Store(http.StatusInternalServerError)
	all.Store(true)
	if !unavailable() {
		t.Fatal("500 for every request, the health check's too: not an outage")
	}
	clock = clock.Add(time.Hour)
	if !unavailable() {
		t.Fatal("500 for every request for an hour: not an outage")
	}

	all.Store(false)
	if !unavailable() {
		t.Fatal("500 for the subject only, first seen now: not an outage within the bound")
	}
	clock = clock.Add(59 * time.Second)
	if !unavailable() {
		t.Fatal("500 for the subject for 59s of a 1m bound: not an outage")
	}
	clock = clock.Add(time.Second)
	if unavailable() {
		t.Fatal("500 for the subject for the whole bound while the registry answers: still an outage, want the subject's failure")
	}

	status.Store(0)
	if unavailable() {
		t.Fatal("the registry answers the subject again: lookup failed")
	}
	status.Store(http.StatusInternalServerError)
	if !unavailable() {
		t.Fatal("500 for the subject after a success: not an outage (the bound's clock did not start again)")
	}
}
