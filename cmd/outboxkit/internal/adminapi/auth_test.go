package adminapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadTokens(t *testing.T) {
	dir := t.TempDir()
	file := func(content string) string {
		p := filepath.Join(dir, "tokens")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	tokens, err := LoadTokens(file("# comment\n\nalice:aaaaaaaaaaaaaaaa1\n"), "",
		env(map[string]string{EnvWriteTokens: "bob:bbbbbbbbbbbbbbbb2,carol:cccccccccccccccc3"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tokens.Names(), " "); got != "alice(read) bob(write) carol(write)" {
		t.Errorf("names: %s", got)
	}
	if tok, ok := tokens.Match("bbbbbbbbbbbbbbbb2"); !ok || tok.Name != "bob" || tok.Scope != ScopeWrite {
		t.Errorf("match bob: %+v %v", tok, ok)
	}
	if _, ok := tokens.Match("bbbbbbbbbbbbbbbb"); ok {
		t.Errorf("a prefix of a token matched")
	}
	if empty, err := LoadTokens("", "", nil); err != nil || !empty.Empty() {
		t.Errorf("no token: %v %v", empty, err)
	}
	for _, c := range []struct{ content, want string }{
		{"alice:short", `token "alice" (entry 1): shorter than 16`},
		{"no-colon-here-at-all", "entry 1: want name:token"},
		{"a:aaaaaaaaaaaaaaaa1\na:aaaaaaaaaaaaaaaa2", `token name "a" is used twice`},
		{"a:aaaaaaaaaaaaaaaa1\nb:aaaaaaaaaaaaaaaa1", `token "b" has the same secret as token "a"`},
	} {
		_, err := LoadTokens(file(c.content), "", nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "aaaaaaaa") {
			t.Errorf("%q: %v, want an error containing %q and no secret", c.content, err, c.want)
		}
	}
	if _, err := LoadTokens(filepath.Join(dir, "missing"), "", nil); err == nil {
		t.Errorf("a missing token file is accepted")
	}
}
