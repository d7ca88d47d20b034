package schema

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// raceTransport plays the other relay: at the encoder's first registration it registers the
// subject itself with the real registry, then answers the encoder's request as Apicurio answers
// the loser of that race (409 "already exists"), without forwarding it.
type raceTransport struct {
	other   *sr.Client
	subject string
	schema  sr.Schema
	posts   atomic.Int32
}

func (rt *raceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/versions") || rt.posts.Add(1) != 1 {
		return http.DefaultTransport.RoundTrip(r)
	}
	if _, err := rt.other.CreateSchema(r.Context(), rt.subject, rt.schema); err != nil {
		return nil, err
	}
	body := `{"error_code":409,"message":"An artifact with ID '` + rt.subject + `' in group 'null' already exists."}`
	return &http.Response{StatusCode: http.StatusConflict, Status: "409 Conflict", Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/vnd.schemaregistry.v1+json"}}, Body: io.NopCloser(strings.NewReader(body))}, nil
}

// Another relay (or worker) registers the subject between this encoder's failed lookup and its
// registration, which the registry refuses: the encoder looks the subject up again and uses it,
// so the events spend no attempt.
func TestEncoderUsesTheSubjectAnotherRelayRegisteredFirst(t *testing.T) {
	for _, version := range []int{0, 1} {
		other, _, _, _ := registry(t)
		topic := testsupport.UniqueName("reg_race")
		s := sr.Schema{Schema: pingSchema, Type: sr.TypeAvro}
		rt := &raceTransport{other: other, subject: Subject(topic), schema: s}
		cl, err := sr.NewClient(sr.URLs(testsupport.SchemaRegistryURL(t)), sr.HTTPClient(&http.Client{Transport: rt, Timeout: 10 * time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		enc, err := NewEncoder(cl, Config{Version: version, Register: true, Schemas: map[string]sr.Schema{Subject(topic): s}})
		if err != nil {
			t.Fatal(err)
		}
		out, err := enc.Encode(context.Background(), topic, []byte(`{"n":7}`))
		if err != nil {
			var re *RegistryError
			t.Fatalf("version %d: the lost registration race failed the event (RegistryError %v, Unavailable %v): %v",
				version, errors.As(err, &re), errors.As(err, &re) && re.Unavailable(), err)
		}
		ss, err := other.SchemaByVersion(context.Background(), Subject(topic), 1)
		if err != nil {
			t.Fatal(err)
		}
		var h sr.ConfluentHeader
		if id, _, err := h.DecodeID(out); err != nil || id != ss.ID {
			t.Errorf("version %d: framed with id %d (%v), the other relay registered id %d", version, id, err, ss.ID)
		}
		if n := rt.posts.Load(); n != 1 {
			t.Errorf("version %d: %d registrations, want the one that lost", version, n)
		}
		if v := versionsOf(t, other, Subject(topic)); len(v) != 1 {
			t.Errorf("version %d: versions %v, want only the other relay's", version, v)
		}
	}
}
