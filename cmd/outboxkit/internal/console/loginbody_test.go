package console

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// countingReader counts the bytes a handler read of a request body.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// tenMiB is a login body of 10 MiB: a form whose token field is that long.
func tenMiB() io.Reader {
	return io.MultiReader(strings.NewReader("token="), io.LimitReader(repeatReader('a'), 10<<20))
}

type repeatReader byte

func (b repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// POST /console/login refuses a 10 MiB body with 413 before parsing it (with or without a
// Content-Length: the handler reads at most its limit), and reads urlencoded forms only: a
// multipart form is refused with 415 unread, even with a real token in it.
func TestLoginRefusesLargeAndMultipartBodies(t *testing.T) {
	mux := newTestConsole(t)
	for _, withLength := range []bool{true, false} {
		body := &countingReader{r: tenMiB()}
		r := httptest.NewRequest(http.MethodPost, "http://relay.test/console/login", body)
		r.ContentLength = -1
		if withLength {
			r.ContentLength = 10<<20 + int64(len("token="))
		}
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", "http://relay.test")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if w.Code != http.StatusRequestEntityTooLarge || body.n > 64<<10 {
			t.Errorf("a 10 MiB login form (Content-Length given: %v): %d after reading %d bytes, want 413 after at most 64 KiB",
				withLength, w.Code, body.n)
		}
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	_ = mw.WriteField("token", writeToken)
	_ = mw.WriteField("next", "/console/keys")
	_ = mw.Close()
	body := &countingReader{r: &form}
	r := httptest.NewRequest(http.MethodPost, "http://relay.test/console/login", body)
	r.Header.Set("Content-Type", mw.FormDataContentType())
	r.Header.Set("Origin", "http://relay.test")
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	if w.Code != http.StatusUnsupportedMediaType || body.n != 0 {
		t.Errorf("a multipart login form: %d after reading %d bytes, want 415 with the body unread", w.Code, body.n)
	}
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, loginRequest(writeToken, "/console/keys"))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/keys" {
		t.Errorf("an urlencoded login: %d to %q, want 303 to /console/keys", w.Code, w.Header().Get("Location"))
	}
}
