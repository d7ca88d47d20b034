package console

import (
	"net/url"
	"strings"
	"unicode"
)

// defaultNext is where a login goes when its next is missing or refused.
const defaultNext = "/console/backlog"

// safeNext returns the page a login goes to: next when it is a path under /console/ on the
// relay's own host, written so that every browser reads it the same way; defaultNext otherwise.
// Browsers (the WHATWG URL parser) read a backslash as a slash and %2e as a dot, so a next with
// a backslash, a control character or white space, a scheme, a host, a dot segment or an empty
// segment (once decoded) is refused, and the path is written again from its decoded form.
func safeNext(next string) string {
	if next == "" || strings.ContainsRune(next, '\\') || strings.IndexFunc(next, unsafeRune) >= 0 {
		return defaultNext
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return defaultNext
	}
	p := u.Path
	if !strings.HasPrefix(p, "/console/") || strings.ContainsRune(p, '\\') || strings.IndexFunc(p, unsafeRune) >= 0 {
		return defaultNext
	}
	if strings.Contains(p, "//") {
		return defaultNext
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return defaultNext
		}
	}
	return (&url.URL{Path: p, RawQuery: u.RawQuery}).String()
}

// unsafeRune reports a control character or white space, which browsers strip or read apart.
func unsafeRune(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }
