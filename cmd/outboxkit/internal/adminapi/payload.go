package adminapi

import "unicode/utf8"

// PayloadText returns the payload as text when it is valid UTF-8 without control characters
// other than white space (JSON, text); ok is false for binary payloads.
func PayloadText(payload []byte) (text string, ok bool) {
	if !utf8.Valid(payload) {
		return "", false
	}
	for _, r := range string(payload) {
		if r < 0x20 && r != '\n' && r != '\r' && r != '\t' {
			return "", false
		}
	}
	return string(payload), true
}
