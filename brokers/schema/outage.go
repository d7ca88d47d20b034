package schema

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// DefaultServerErrorBound is ServerErrorBound's default.
const DefaultServerErrorBound = 5 * time.Minute

// ServerErrorBound sets how long the registry may answer a server error for one subject, while
// it answers its health check, before the error counts as the subject's failure (attempts
// spent) instead of an outage (no attempts); 0 means DefaultServerErrorBound.
func ServerErrorBound(d time.Duration) PublisherOption {
	return func(p *publisher) {
		if d > 0 {
			p.serverErrors.bound = d
		}
	}
}

// serverErrors tells a registry that is down from one that fails one subject. A lookup that
// fails with a server error that may be the subject's (servedError) is checked against the
// registry's health (its global configuration, which a registry serves from its storage): if
// that fails too, the registry is down and the error stays an outage; if it answers, the
// subject's errors are timed from the first one, and once they have lasted bound the error is
// the subject's failure (RegistryError.subjectFault), which spends attempts.
type serverErrors struct {
	bound  time.Duration
	client *sr.Client
	now    func() time.Time

	mu    sync.Mutex
	since map[string]time.Time // subject -> first server error while the registry answered
}

// classify returns err, or for a subject's server error that has lasted bound while the
// registry answers its health check, a copy marked as the subject's failure.
func (s *serverErrors) classify(ctx context.Context, err error) error {
	var re *RegistryError
	if !errors.As(err, &re) || re.Subject == "" || !servedError(re.Err) || !s.registryAnswers(ctx) {
		return err
	}
	now := s.now()
	s.mu.Lock()
	first, ok := s.since[re.Subject]
	if !ok {
		if s.since == nil {
			s.since = map[string]time.Time{}
		}
		s.since[re.Subject], first = now, now
	}
	s.mu.Unlock()
	if now.Sub(first) < s.bound {
		return err
	}
	return &RegistryError{Subject: re.Subject, ID: re.ID, subjectFault: true, Err: fmt.Errorf(
		"%w (the registry answers its health check but has failed this subject for longer than server_error_bound %s: counted as the subject's failure)",
		re.Err, s.bound)}
}

// ok forgets the server errors of subject, whose lookup succeeded.
func (s *serverErrors) ok(subject string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.since, subject)
}

// registryAnswers reports whether the registry answers its health check: GET /config (the
// global compatibility level), within 5 s.
func (s *serverErrors) registryAnswers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res := s.client.Compatibility(ctx)
	return len(res) == 1 && res[0].Err == nil
}

// servedError reports a server error that one subject may cause while the registry is up: a
// 5xx status other than 502, 503 and 504 (which a proxy or an overloaded or starting registry
// answers for every request).
func servedError(err error) bool {
	var resp *sr.ResponseError
	if !errors.As(err, &resp) || resp.StatusCode < http.StatusInternalServerError {
		return false
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return false
	}
	return true
}
