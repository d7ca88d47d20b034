package adminapi

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
)

// Scope is what a token may do: read the views, or also act (write implies read).
type Scope int

// Scopes.
const (
	ScopeRead Scope = iota + 1
	ScopeWrite
)

func (s Scope) String() string {
	if s == ScopeWrite {
		return "write"
	}
	return "read"
}

// Token is one named bearer token. Only its name and scope are ever printed.
type Token struct {
	Name   string
	Scope  Scope
	digest [sha256.Size]byte
}

// LogValue prints the name and scope, never the secret.
func (t Token) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", t.Name), slog.String("scope", t.Scope.String()))
}

// Tokens is the set of tokens the admin API and console accept. An empty set means both are off.
type Tokens struct{ list []Token }

// Environment variables holding tokens, in the format of a tokens file (name:token, one per line
// or separated by commas).
const (
	EnvReadTokens  = "OUTBOXKIT_ADMIN_READ_TOKENS"
	EnvWriteTokens = "OUTBOXKIT_ADMIN_WRITE_TOKENS"
)

// minTokenLength refuses guessable tokens.
const minTokenLength = 16

// LoadTokens reads the read and write tokens from their files ("" for none) and from
// EnvReadTokens and EnvWriteTokens (lookupEnv nil ignores the environment). A token file holds
// one "name:token" per line; blank lines and lines starting with # are skipped. Errors name the
// file or variable and the line, never a token.
func LoadTokens(readFile, writeFile string, lookupEnv func(string) (string, bool)) (*Tokens, error) {
	t := &Tokens{}
	for _, src := range []struct {
		file, env string
		scope     Scope
	}{{readFile, EnvReadTokens, ScopeRead}, {writeFile, EnvWriteTokens, ScopeWrite}} {
		if src.file != "" {
			data, err := os.ReadFile(src.file)
			if err != nil {
				return nil, fmt.Errorf("admin %s tokens: %w", src.scope, err)
			}
			if err := t.add(string(data), src.scope, src.file); err != nil {
				return nil, err
			}
		}
		if lookupEnv != nil {
			if v, ok := lookupEnv(src.env); ok && strings.TrimSpace(v) != "" {
				if err := t.add(strings.ReplaceAll(v, ",", "\n"), src.scope, src.env); err != nil {
					return nil, err
				}
			}
		}
	}
	return t, nil
}

func (t *Tokens) add(text string, scope Scope, source string) error {
	sc := bufio.NewScanner(strings.NewReader(text))
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		name, secret, ok := strings.Cut(s, ":")
		name, secret = strings.TrimSpace(name), strings.TrimSpace(secret)
		switch {
		case !ok || name == "":
			return fmt.Errorf("%s: entry %d: want name:token", source, line)
		case len(secret) < minTokenLength:
			return fmt.Errorf("%s: token %q (entry %d): shorter than %d characters", source, name, line, minTokenLength)
		}
		tok := Token{Name: name, Scope: scope, digest: sha256.Sum256([]byte(secret))}
		for _, other := range t.list {
			if other.Name == name {
				return fmt.Errorf("%s: token name %q is used twice", source, name)
			}
			if other.digest == tok.digest {
				return fmt.Errorf("%s: token %q has the same secret as token %q", source, name, other.Name)
			}
		}
		t.list = append(t.list, tok)
	}
	return sc.Err()
}

// Empty reports whether no token is configured: the API and console are then off.
func (t *Tokens) Empty() bool { return t == nil || len(t.list) == 0 }

// Names lists the tokens' names and scopes (for the start-up log).
func (t *Tokens) Names() []string {
	var out []string
	for _, tok := range t.list {
		out = append(out, tok.Name+"("+tok.Scope.String()+")")
	}
	return out
}

// Match returns the token whose secret is s. Every token is compared, in constant time, so the
// time taken says nothing about which or how much matched.
func (t *Tokens) Match(s string) (Token, bool) {
	if t == nil || s == "" {
		return Token{}, false
	}
	d := sha256.Sum256([]byte(s))
	var found Token
	ok := false
	for _, tok := range t.list {
		if subtle.ConstantTimeCompare(d[:], tok.digest[:]) == 1 {
			found, ok = tok, true
		}
	}
	return found, ok
}

// byDigest returns the token of t with tok's name and secret (by digest), or false.
func (t *Tokens) byDigest(tok Token) (Token, bool) {
	if t == nil {
		return Token{}, false
	}
	for _, cur := range t.list {
		if cur.Name == tok.Name && subtle.ConstantTimeCompare(cur.digest[:], tok.digest[:]) == 1 {
			return cur, true
		}
	}
	return Token{}, false
}

// Bearer returns the token of an "Authorization: Bearer <token>" header.
func Bearer(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
