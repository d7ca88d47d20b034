package admin

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Failure fingerprints group events whose last errors differ only in the values they name: ids,
// numbers, addresses. The normalised text replaces each such value with a placeholder; the
// fingerprint is a short hash of it, stable across relays and versions of this code that
// normalise alike.
var fingerprintRules = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), "<uuid>"},
	{regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b`), "<addr>"},
	{regexp.MustCompile(`(?i)\b0x[0-9a-f]+\b`), "<hex>"},
	{regexp.MustCompile(`(?i)\b[0-9a-f]{8,}\b`), "<hex>"},
	{regexp.MustCompile(`\d+(\.\d+)?`), "<n>"},
	{regexp.MustCompile(`\s+`), " "},
}

// keptWhole is the part of an error text NormaliseError keeps whole: the subject and version of
// the schema a payload does not fit, as brokers/schema.MismatchError writes them.
var keptWhole = regexp.MustCompile(`schema of subject "[^"]*" version \d+`)

// normaliseValues replaces the variable parts of text with placeholders (fingerprintRules).
func normaliseValues(text string) string {
	for _, r := range fingerprintRules {
		text = r.re.ReplaceAllString(text, r.with)
	}
	return text
}

// maxNormalisedError bounds the normalised error text kept with a failure group.
const maxNormalisedError = 300

// NormaliseError returns the error text with its variable parts (UUIDs, addresses, hexadecimal
// ids, numbers) replaced by placeholders and its white space collapsed: two failures with the
// same cause normalise to the same text.
//
// The subject and version of a schema an event does not fit are kept as they are (keptWhole), so
// that the events each schema version refuses form a group of their own.
func NormaliseError(text string) string {
	var b strings.Builder
	last := 0
	for _, span := range keptWhole.FindAllStringIndex(text, -1) {
		b.WriteString(normaliseValues(text[last:span[0]]))
		b.WriteString(text[span[0]:span[1]])
		last = span[1]
	}
	b.WriteString(normaliseValues(text[last:]))
	text = strings.TrimSpace(b.String())
	if len(text) > maxNormalisedError {
		cut := maxNormalisedError
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	return text
}

// Fingerprint returns the failure group of an error text: 12 hexadecimal digits of the SHA-256
// of NormaliseError(text). An empty text has the fingerprint "".
func Fingerprint(text string) string {
	if strings.TrimSpace(text) == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(NormaliseError(text)))
	return hex.EncodeToString(sum[:6])
}
