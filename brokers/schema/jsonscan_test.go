package schema

import (
	"strings"
	"testing"
)

// TestPlainRunStopsAtTheFirstSpecialByte: reading eight bytes at a time, plainRun never passes a
// quote, a backslash, a control character or a non-ASCII byte, wherever it sits in the word.
func TestPlainRunStopsAtTheFirstSpecialByte(t *testing.T) {
	for _, special := range []byte{'"', '\\', 0, 0x1f, 0x7f + 1, 0xff, '\n'} {
		for pos := range 24 {
			d := []byte(strings.Repeat("a~ !#[]}", 4))
			d[pos] = special
			got := plainRun(d, 0)
			if got > pos {
				t.Fatalf("byte %#x at %d: plainRun went to %d", special, pos, got)
			}
			for _, c := range d[:got] {
				if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
					t.Fatalf("byte %#x at %d: plainRun passed %#x", special, pos, c)
				}
			}
		}
	}
	if got := plainRun([]byte(strings.Repeat("x", 21)), 3); got != 19 {
		t.Errorf("plain text of 21 bytes from 3: %d, want 19 (the last whole word)", got)
	}
}
