package schema

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"unicode/utf8"
	"unsafe"
)

// jsonScanner reads the JSON of one payload held in memory, token by token, for the direct
// encoders (avrodirect.go, protodirect.go). It validates what it reads as strictly as
// encoding/json does and never allocates on the common path: strings without escapes and numbers
// are returned as slices of the payload.
//
// It is written here rather than taken from encoding/json's Decoder or
// github.com/go-json-experiment/json/jsontext because the encoders need what neither gives
// cheaply: jumping back to a value read earlier (to write a record's fields in schema order, or
// to try a union's next branch), without an io.Reader, a decoder per payload or a copy of each
// token. Anything it does not take on the fast path (escaped strings, invalid UTF-8) it hands
// back so that the caller can use the slow, generic path, whose semantics are the reference.
type jsonScanner struct {
	data []byte
	pos  int
}

// errSyntax is a payload the scanner refuses; the caller falls back to encoding/json, which
// words the error.
var errSyntax = errors.New("json syntax")

// ws skips white space and returns the next byte, 0 at the end.
func (s *jsonScanner) ws() byte {
	for s.pos < len(s.data) {
		switch c := s.data[s.pos]; c {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return c
		}
	}
	return 0
}

// consume skips white space and then c, reporting whether c was there.
func (s *jsonScanner) consume(c byte) bool {
	if s.ws() != c {
		return false
	}
	s.pos++
	return true
}

// atEnd reports whether only white space is left.
func (s *jsonScanner) atEnd() bool { return s.ws() == 0 && s.pos == len(s.data) }

// str reads a string at the current position (after white space) and returns its content
// between the quotes; escaped reports a backslash in it (the content then needs unquoting).
func (s *jsonScanner) str() (raw []byte, escaped bool, err error) {
	if !s.consume('"') {
		return nil, false, errSyntax
	}
	start := s.pos
	ascii := true
	s.pos = plainRun(s.data, s.pos)
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			raw = s.data[start:s.pos]
			s.pos++
			if !ascii && !utf8.Valid(raw) {
				return nil, false, errSyntax // encoding/json would replace the bad bytes: leave it the case
			}
			return raw, escaped, nil
		case c == '\\':
			escaped = true
			if !s.escape() {
				return nil, false, errSyntax
			}
			continue
		case c < 0x20:
			return nil, false, errSyntax
		case c >= 0x80:
			ascii = false
		}
		s.pos++
	}
	return nil, false, errSyntax
}

// plainRun returns the position of the first byte from i on that is a quote, a backslash, a
// control character or not ASCII, reading eight bytes at a time (the body of a string is mostly
// plain text).
func plainRun(d []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(d); i += 8 {
		x := binary.LittleEndian.Uint64(d[i:])
		quote, backslash := x^(ones*'"'), x^(ones*'\\')
		special := (x - ones*0x20) | (quote-ones)&^quote | (backslash-ones)&^backslash | x
		if special&highs != 0 {
			break
		}
	}
	return i
}

// escape checks the escape sequence at the current position (a backslash) and skips it.
func (s *jsonScanner) escape() bool {
	if s.pos+1 >= len(s.data) {
		return false
	}
	switch s.data[s.pos+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.pos += 2
		return true
	case 'u':
		if s.pos+6 > len(s.data) {
			return false
		}
		for _, h := range s.data[s.pos+2 : s.pos+6] {
			if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
				return false
			}
		}
		s.pos += 6
		return true
	}
	return false
}

// text reads a string and returns its unquoted content as a string.
func (s *jsonScanner) text() (string, error) {
	start := s.pos
	raw, escaped, err := s.str()
	if err != nil {
		return "", err
	}
	if !escaped {
		return string(raw), nil
	}
	var out string
	if err := json.Unmarshal(s.data[start+s.wsLen(start):s.pos], &out); err != nil {
		return "", errSyntax
	}
	return out, nil
}

// wsLen is the length of the white space at i.
func (s *jsonScanner) wsLen(i int) int {
	n := 0
	for i+n < len(s.data) {
		switch s.data[i+n] {
		case ' ', '\t', '\n', '\r':
			n++
		default:
			return n
		}
	}
	return n
}

// number reads a number and returns its text, checked against JSON's grammar.
func (s *jsonScanner) number() ([]byte, error) {
	s.ws()
	start := s.pos
	d := s.data
	i := s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = digits(d, i)
	default:
		return nil, errSyntax
	}
	if i < len(d) && d[i] == '.' {
		j := digits(d, i+1)
		if j == i+1 {
			return nil, errSyntax
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := digits(d, i)
		if j == i {
			return nil, errSyntax
		}
		i = j
	}
	s.pos = i
	return d[start:i], nil
}

func digits(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}

// literal reads true, false or null (after white space).
func (s *jsonScanner) literal(word string) bool {
	s.ws()
	if len(s.data)-s.pos < len(word) || string(s.data[s.pos:s.pos+len(word)]) != word {
		return false
	}
	s.pos += len(word)
	return true
}

// skip reads one value of any kind, checking it, and returns where it starts and ends.
func (s *jsonScanner) skip() (start, end int, err error) {
	c := s.ws()
	start = s.pos
	switch {
	case c == '"':
		_, _, err = s.str()
	case c == '-' || (c >= '0' && c <= '9'):
		_, err = s.number()
	case c == 't':
		err = s.expect(s.literal("true"))
	case c == 'f':
		err = s.expect(s.literal("false"))
	case c == 'n':
		err = s.expect(s.literal("null"))
	case c == '[':
		s.pos++
		err = s.elements(func() error { _, _, err := s.skip(); return err })
	case c == '{':
		s.pos++
		err = s.members(func([]byte, bool) error { _, _, err := s.skip(); return err })
	default:
		err = errSyntax
	}
	return start, s.pos, err
}

func (s *jsonScanner) expect(ok bool) error {
	if !ok {
		return errSyntax
	}
	return nil
}

// elements reads the elements of an array whose '[' is read, calling each for each element.
func (s *jsonScanner) elements(each func() error) error {
	if s.consume(']') {
		return nil
	}
	for {
		if err := each(); err != nil {
			return err
		}
		if s.consume(']') {
			return nil
		}
		if !s.consume(',') {
			return errSyntax
		}
	}
}

// members reads the members of an object whose '{' is read, calling each with each member's name
// (raw, escaped as str returns it) with the scanner at its value, which each must read.
func (s *jsonScanner) members(each func(name []byte, escaped bool) error) error {
	if s.consume('}') {
		return nil
	}
	for {
		name, escaped, err := s.str()
		if err != nil {
			return err
		}
		if !s.consume(':') {
			return errSyntax
		}
		if err := each(name, escaped); err != nil {
			return err
		}
		if s.consume('}') {
			return nil
		}
		if !s.consume(',') {
			return errSyntax
		}
	}
}

// unquoteName returns a member name read by members as a string.
func unquoteName(name []byte, escaped bool) (string, error) {
	if !escaped {
		return string(name), nil
	}
	quoted := make([]byte, 0, len(name)+2)
	quoted = append(append(append(quoted, '"'), name...), '"')
	var out string
	if err := json.Unmarshal(quoted, &out); err != nil {
		return "", errSyntax
	}
	return out, nil
}

// transient views b as a string without copying, for parsing functions (strconv) whose result
// does not keep it; b must not change while the string is in use.
func transient(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
