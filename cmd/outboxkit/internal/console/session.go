package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
)

// sessionTTL is how long a console session lasts after its login; the cookie expires with it.
const sessionTTL = 8 * time.Hour

// maxSessions bounds the sessions kept: a login beyond it ends the one closest to its expiry.
const maxSessions = 10000

// session is a logged-in browser: the token it logged in with (its name, scope and digest, never
// the secret) and when it ends.
type session struct {
	token   adminapi.Token
	expires time.Time
}

// sessions are the console's server-side sessions, by the SHA-256 of their id (the cookie's
// value), so that the table holds no usable cookie.
type sessions struct {
	mu   sync.Mutex
	byID map[[sha256.Size]byte]session
	ttl  time.Duration
	now  func() time.Time
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{byID: map[[sha256.Size]byte]session{}, ttl: ttl, now: now}
}

// start opens a session for tok and returns its id: 32 random bytes, base64url.
func (s *sessions) start(tok adminapi.Token) (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("console: session id: %w", err)
	}
	id := base64.RawURLEncoding.EncodeToString(raw[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, v := range s.byID {
		if !now.Before(v.expires) {
			delete(s.byID, k)
		}
	}
	if len(s.byID) >= maxSessions {
		var oldest [sha256.Size]byte
		first := true
		for k, v := range s.byID {
			if first || v.expires.Before(s.byID[oldest].expires) {
				oldest, first = k, false
			}
		}
		delete(s.byID, oldest)
	}
	s.byID[sha256.Sum256([]byte(id))] = session{token: tok, expires: now.Add(s.ttl)}
	return id, nil
}

// get returns the token of the session id while it lasts; an expired session is ended.
func (s *sessions) get(id string) (adminapi.Token, bool) {
	if id == "" {
		return adminapi.Token{}, false
	}
	key := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byID[key]
	if !ok {
		return adminapi.Token{}, false
	}
	if !s.now().Before(v.expires) {
		delete(s.byID, key)
		return adminapi.Token{}, false
	}
	return v.token, true
}

// end ends the session id (a logout).
func (s *sessions) end(id string) {
	key := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, key)
}
