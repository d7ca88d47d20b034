package relay

import (
	"strings"
	"unicode/utf8"
)

// TruncateUTF8 cuts s to at most n bytes on a character boundary and replaces invalid UTF-8
// (which PostgreSQL would reject, failing every acknowledgement of the batch), so the result is
// always valid UTF-8.
func TruncateUTF8(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
