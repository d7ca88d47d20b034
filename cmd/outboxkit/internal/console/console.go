// Package console is the relay's web console: server-rendered pages of the admin views (backlog,
// relays, blocked keys, failure groups, dead letters) and the actions as HTML forms, behind the
// admin API's tokens (a login form sets the token in a cookie). No JavaScript is needed; a few
// lines of it refresh the live parts of the backlog and keys pages.
package console

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
	"github.com/outboxkit/outboxkit/forwarder/admin"
)

//go:embed templates/*.html
var templateFiles embed.FS

// staticFiles are the console's style sheet and script: files of their own, so that the
// Content-Security-Policy allows no inline code.
//
//go:embed static
var staticFiles embed.FS

// contentSecurityPolicy allows the console's own files only: no inline script or style, no
// plugin, forms posted to the console only, no <base>, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'"

// cookieName holds the session id of a logged-in browser (never the token).
const cookieName = "outboxkit_session"

// Console serves /console/.
type Console struct {
	api    *adminapi.API
	adm    *admin.Admin
	logger *slog.Logger
	pages  map[string]*template.Template
	// sessions are the logged-in browsers.
	sessions *sessions
}

// New returns the console of api.
func New(api *adminapi.API, logger *slog.Logger) (*Console, error) {
	funcs := template.FuncMap{
		"age":  func(t time.Time) string { return formatAge(time.Since(t)) },
		"in":   func(t *time.Time) string { return inTime(t) },
		"cut":  cut,
		"time": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"key":  func(k adminapi.KeyView) string { return k.AggregateType + "/" + k.AggregateID },
		"list": func(v ...string) []string { return v },
		"deref": func(v any) any {
			switch p := v.(type) {
			case *time.Time:
				return *p
			case *string:
				return *p
			}
			return v
		},
	}
	c := &Console{api: api, adm: api.Admin(), logger: logger, pages: map[string]*template.Template{},
		sessions: newSessions(sessionTTL, time.Now)}
	for _, page := range []string{"login", "backlog", "relays", "keys", "groups", "letters", "letter", "action", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", page, err)
		}
		c.pages[page] = t
	}
	return c, nil
}

// Register adds the console's routes to mux.
func (c *Console) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /console/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/backlog", http.StatusSeeOther)
	})
	mux.Handle("GET /console/static/", c.static())
	mux.HandleFunc("GET /console/login", c.loginForm)
	mux.HandleFunc("POST /console/login", c.login)
	mux.HandleFunc("POST /console/logout", c.logout)
	mux.Handle("GET /console/backlog", c.page(adminapi.ScopeRead, c.backlog))
	mux.Handle("GET /console/relays", c.page(adminapi.ScopeRead, c.relays))
	mux.Handle("GET /console/keys", c.page(adminapi.ScopeRead, c.keys))
	mux.Handle("GET /console/groups", c.page(adminapi.ScopeRead, c.groups))
	mux.Handle("GET /console/dead-letters", c.page(adminapi.ScopeRead, c.letters))
	mux.Handle("GET /console/dead-letters/{id}", c.page(adminapi.ScopeRead, c.letter))
	mux.Handle("POST /console/actions/{action}", c.page(adminapi.ScopeWrite, c.action))
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, http.StatusNotFound, "error", view{Title: "Not found", Error: "no such page: " + r.URL.Path})
	})
}

// view is what every page template gets.
type view struct {
	Title string
	// Nav is the page's menu entry; Live marks the part the script refreshes.
	Nav   string
	Live  bool
	Token adminapi.Token
	Query url.Values
	Error string
	Data  any
}

// handlerFunc renders a page: it returns the template and the view.
type handlerFunc func(tok adminapi.Token, r *http.Request) (string, view, error)

// page authenticates the cookie's token for scope and renders h's page.
func (c *Console) page(scope adminapi.Scope, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, code := c.authorize(r, scope)
		if code != http.StatusOK && (code == http.StatusForbidden || r.Method != http.MethodGet) {
			c.api.AuditAuthFailure(r.Context(), r.RemoteAddr, r.URL.Path, "console", code)
		}
		switch code {
		case http.StatusUnauthorized:
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/console/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.render(w, code, "error", view{Title: "Not logged in", Error: "log in again: the session ended or its token was revoked"})
			return
		case http.StatusForbidden:
			c.render(w, code, "error", view{Title: "Forbidden", Token: tok, Error: "token " + tok.Name + " may read, not act: log in with a write token"})
			return
		}
		if r.Method == http.MethodPost && !sameOrigin(r) {
			c.render(w, http.StatusForbidden, "error", view{Title: "Forbidden", Token: tok, Error: "cross-site form refused"})
			return
		}
		name, v, err := h(tok, r)
		v.Token, v.Query = tok, r.URL.Query()
		if err != nil {
			code := http.StatusInternalServerError
			var ie adminapi.InputError
			var fe formError
			switch {
			case errors.As(err, &fe):
				code = fe.code
			case errors.As(err, &ie):
				code = http.StatusBadRequest
			case errors.Is(err, admin.ErrEventNotFound):
				code = http.StatusNotFound
			}
			v.Error = err.Error()
			if code == http.StatusInternalServerError {
				c.logger.Error("console request failed", "path", r.URL.Path, "who", tok.Name, "error", err)
				v.Error = c.api.ClientError(err)
			}
			c.render(w, code, "error", v)
			return
		}
		c.render(w, http.StatusOK, name, v)
	})
}

func (c *Console) render(w http.ResponseWriter, code int, name string, v view) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	setSecurityHeaders(w.Header())
	w.WriteHeader(code)
	if err := c.pages[name].Execute(w, v); err != nil {
		c.logger.Error("console: render", "page", name, "error", err)
	}
}

// authorize checks the request's session for scope: 200 with its token, 401 (no session, an
// ended one, or one whose token is no longer configured: a reload of the tokens ends the
// sessions of the tokens it removed or changed) or 403 (a read token on an action).
func (c *Console) authorize(r *http.Request, scope adminapi.Scope) (adminapi.Token, int) {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return adminapi.Token{}, http.StatusUnauthorized
	}
	tok, ok := c.sessions.get(ck.Value)
	if !ok {
		return adminapi.Token{}, http.StatusUnauthorized
	}
	current, ok := c.api.Current(tok)
	if !ok {
		c.sessions.end(ck.Value)
		return adminapi.Token{}, http.StatusUnauthorized
	}
	if current.Scope < scope {
		return current, http.StatusForbidden
	}
	return current, http.StatusOK
}

// setSecurityHeaders sets the headers of every console answer.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: with no-referrer a browser posts forms with "Origin: null",
	// which sameOrigin refuses.
	h.Set("Referrer-Policy", "same-origin")
}

// static serves the console's style sheet and script (no secret in them: the login page needs
// them before any token).
func (c *Console) static() http.Handler {
	files := http.StripPrefix("/console/", http.FileServerFS(staticFiles))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		files.ServeHTTP(w, r)
	})
}

// sameOrigin refuses a form posted from another site (the cookie is SameSite=Strict as well).
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" || origin == "null" {
		return origin == ""
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	c.render(w, http.StatusOK, "login", view{Title: "Log in", Query: r.URL.Query()})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		c.api.AuditAuthFailure(r.Context(), r.RemoteAddr, r.URL.Path, "console", http.StatusForbidden)
		c.render(w, http.StatusForbidden, "login", view{Title: "Log in", Error: "cross-site form refused"})
		return
	}
	if err := readForm(w, r, maxLoginBody); err != nil {
		var fe formError
		_ = errors.As(err, &fe)
		c.api.AuditAuthFailure(r.Context(), r.RemoteAddr, r.URL.Path, "console", fe.code)
		c.render(w, fe.code, "login", view{Title: "Log in", Error: err.Error()})
		return
	}
	secret := strings.TrimSpace(r.PostForm.Get("token"))
	tok, code := c.api.Authorize(secret, adminapi.ScopeRead)
	if code != http.StatusOK {
		c.api.AuditAuthFailure(r.Context(), r.RemoteAddr, r.URL.Path, "console", http.StatusUnauthorized)
		c.render(w, http.StatusUnauthorized, "login", view{Title: "Log in", Error: "unknown token"})
		return
	}
	id, err := c.sessions.start(tok)
	if err != nil {
		c.logger.Error("console login failed", "error", err)
		c.render(w, http.StatusInternalServerError, "login", view{Title: "Log in", Error: "no session could be opened"})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/console/", MaxAge: int(sessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	c.api.Audit(r.Context(), c.logger, "console login", slog.String("who", tok.Name), slog.String("scope", tok.Scope.String()),
		slog.String("remote", r.RemoteAddr))
	http.Redirect(w, r, safeNext(r.PostForm.Get("next")), http.StatusSeeOther)
}

// logout ends the session on the server and clears the cookie.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(cookieName); err == nil {
		if tok, ok := c.sessions.get(ck.Value); ok {
			c.api.Audit(r.Context(), c.logger, "console logout", slog.String("who", tok.Name), slog.String("remote", r.RemoteAddr))
		}
		c.sessions.end(ck.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/console/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}
