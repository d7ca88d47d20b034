package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/admin"
)

// Config is what the API serves.
type Config struct {
	Admin  *admin.Admin
	Tokens *Tokens
	Logger *slog.Logger
	// SlotGroups are the lease groups whose cdc slot the slots view lists even when it is missing
	// (the relay's group when its source is cdc).
	SlotGroups []string
	// WALSlot is the slot the relay streams when its source is wal ("" otherwise: GET
	// /api/v1/wal answers 404).
	WALSlot string
	// Units reads the exactly-once units; nil when the relay does not deliver exactly once.
	Units func(ctx context.Context) ([]admin.UnitStatus, error)
	// Scrub removes the configuration's secrets from an error's text before a client sees it
	// (ClientError); nil: only the generic patterns.
	Scrub func(string) string
}

// API is the admin HTTP API: JSON under /api/v1/.
type API struct {
	cfg Config
	// tokens are the tokens accepted now: Config.Tokens, then those of each SetTokens.
	tokens atomic.Pointer[Tokens]
	// failures bounds the log lines of failed authentications.
	failures *failureLog
}

// requestTimeout bounds the database work of one request.
const requestTimeout = 30 * time.Second

// New returns the API, or an error when no token is configured: the API is never open.
func New(cfg Config) (*API, error) {
	if cfg.Admin == nil {
		return nil, errors.New("adminapi: no Admin")
	}
	if cfg.Tokens.Empty() {
		return nil, errors.New("adminapi: no token configured: the admin API stays off")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a := &API{cfg: cfg, failures: newFailureLog()}
	a.tokens.Store(cfg.Tokens)
	return a, nil
}

// SetTokens replaces the accepted tokens (a reload of the token files): a removed or changed
// token is refused from the next request on, and the console's sessions of it end.
func (a *API) SetTokens(t *Tokens) { a.tokens.Store(t) }

// Current returns tok as the tokens accepted now know it (its scope may have changed), or false
// when its secret is no longer accepted.
func (a *API) Current(tok Token) (Token, bool) { return a.tokens.Load().byDigest(tok) }

// Register adds the API's routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	read := func(path string, h func(r *http.Request) (any, error)) {
		mux.Handle("GET /api/v1/"+path, a.handler(ScopeRead, func(_ Token, r *http.Request) (any, error) { return h(r) }))
	}
	read("backlog", func(r *http.Request) (any, error) {
		topics, err := a.cfg.Admin.Status(r.Context())
		return Topics(topics, time.Now()), err
	})
	read("relays", func(r *http.Request) (any, error) {
		relays, leases, err := a.cfg.Admin.Relays(r.Context())
		return Relays(relays, leases), err
	})
	read("slots", func(r *http.Request) (any, error) {
		slots, err := a.cfg.Admin.Slots(r.Context(), a.cfg.SlotGroups...)
		return Slots(slots), err
	})
	read("wal", a.wal)
	read("units", a.units)
	read("keys", a.keys)
	read("dead-letters", a.deadLetters)
	read("dead-letters/{id}", a.deadLetter)
	read("groups", a.groups)
	read("scheduled", a.scheduled)
	mux.Handle("POST /api/v1/actions/{action}", a.handler(ScopeWrite, a.action))
	mux.Handle("POST /api/v1/scheduled/cancel", a.handler(ScopeWrite, a.cancelScheduled))
	mux.Handle("/api/v1/", a.handler(ScopeRead, func(_ Token, r *http.Request) (any, error) {
		return nil, statusError{http.StatusNotFound, fmt.Errorf("no such endpoint: %s %s", r.Method, r.URL.Path)}
	}))
}

// statusError is an error with its HTTP status.
type statusError struct {
	code int
	err  error
}

func (e statusError) Error() string { return e.err.Error() }

// handler authenticates the request for scope, runs h and writes its result or error as JSON.
func (a *API) handler(scope Scope, h func(tok Token, r *http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, code := a.Authorize(Bearer(r), scope)
		if code != http.StatusOK {
			a.AuditAuthFailure(r.Context(), r.RemoteAddr, r.URL.Path, "api", code)
			if code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="outboxkit"`)
			}
			writeJSON(w, code, map[string]string{"error": http.StatusText(code)})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		v, err := h(tok, r.WithContext(ctx))
		if err != nil {
			code := http.StatusInternalServerError
			var se statusError
			var ie InputError
			switch {
			case errors.As(err, &se):
				code = se.code
			case errors.As(err, &ie):
				code = http.StatusBadRequest
			case errors.Is(err, admin.ErrEventNotFound):
				code = http.StatusNotFound
			}
			msg := err.Error()
			if code == http.StatusInternalServerError {
				a.cfg.Logger.Error("admin API request failed", "path", r.URL.Path, "who", tok.Name, "error", err)
				msg = a.ClientError(err)
			}
			writeJSON(w, code, map[string]string{"error": msg})
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
}

// Authorize checks a token for scope: 200 with the token, 401 (no or unknown token) or 403
// (a read token on a write action).
func (a *API) Authorize(secret string, scope Scope) (Token, int) {
	tok, ok := a.tokens.Load().Match(secret)
	switch {
	case !ok:
		return Token{}, http.StatusUnauthorized
	case tok.Scope < scope:
		return tok, http.StatusForbidden
	}
	return tok, http.StatusOK
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func (a *API) units(r *http.Request) (any, error) {
	if a.cfg.Units == nil {
		return nil, statusError{http.StatusNotFound, errors.New("the relay does not deliver exactly once: it has no transactional units")}
	}
	units, err := a.cfg.Units(r.Context())
	return Units(units), err
}

func (a *API) keys(r *http.Request) (any, error) {
	f, err := queryFilter(r)
	if err != nil {
		return nil, err
	}
	keys, err := a.cfg.Admin.BlockedKeys(r.Context(), KeyFilter(f))
	return BlockedKeys(keys), err
}

func (a *API) deadLetters(r *http.Request) (any, error) {
	f, err := queryFilter(r)
	if err != nil {
		return nil, err
	}
	letters, err := a.cfg.Admin.FindDeadLetters(r.Context(), f)
	return Events(letters), err
}

func (a *API) deadLetter(r *http.Request) (any, error) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return nil, InputError{fmt.Errorf("%q is not an event id", r.PathValue("id"))}
	}
	d, err := a.cfg.Admin.Event(r.Context(), id)
	return Detail(d), err
}

func (a *API) groups(r *http.Request) (any, error) {
	f, err := queryFilter(r)
	if err != nil {
		return nil, err
	}
	groups, err := a.cfg.Admin.FailureGroups(r.Context(), f)
	return Groups(groups), err
}

func queryFilter(r *http.Request) (admin.EventFilter, error) {
	s, err := SelectionFromQuery(r.URL.Query())
	if err != nil {
		return admin.EventFilter{}, InputError{err}
	}
	f, err := s.Filter(time.Now())
	if err != nil {
		return f, InputError{err}
	}
	return f, nil
}

// maxActionBody bounds an action's request body: a confirmation names every event id of its dry
// run, about 40 bytes each, so 16 MiB carries some 400,000 of them.
const maxActionBody = 16 << 20

// action runs POST /api/v1/actions/{skip|replay|discard} with a Selection as its body, and
// audits it in the log: who (the token's name), what, how many.
func (a *API) action(tok Token, r *http.Request) (any, error) {
	var s Selection
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, statusError{http.StatusRequestEntityTooLarge, fmt.Errorf("request body: more than %d bytes", maxActionBody)}
		}
		return nil, InputError{fmt.Errorf("request body: %w", err)}
	}
	res, err := a.Act(r.Context(), tok, r.PathValue("action"), s, "api", r.RemoteAddr)
	if err != nil {
		return nil, err
	}
	v := Action(res)
	v.Listed = len(s.EventIDs)
	return v, nil
}

// Act runs an action for tok, asked from remote (a client address) through via (api or
// console), and audits it (auditAction): whatever the log level, with the rows it changed even
// when it failed part of the way, and the ids of the events it matched.
func (a *API) Act(ctx context.Context, tok Token, action string, s Selection, via, remote string) (admin.ActionResult, error) {
	res, err := Run(ctx, a.cfg.Admin, action, s)
	a.auditAction(ctx, tok, remote, via, action, s, res, err)
	return res, err
}

// Admin returns the admin.Admin the API serves (the console reads through it).
func (a *API) Admin() *admin.Admin { return a.cfg.Admin }

// WALSlot returns the slot the relay streams when its source is wal ("" otherwise).
func (a *API) WALSlot() string { return a.cfg.WALSlot }

// describe prints the selection for the audit log.
func (s Selection) describe() string {
	b, _ := json.Marshal(Selection{EventIDs: s.EventIDs, Key: s.Key, Tenant: s.Tenant, Topic: s.Topic, Group: s.Group,
		EventType: s.EventType, Error: s.Error, Since: s.Since, Until: s.Until, All: s.All})
	return string(b)
}
