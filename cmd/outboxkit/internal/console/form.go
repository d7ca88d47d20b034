package console

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
)

// Body limits of the console's forms. A login carries a token and a next page; an action's
// confirmation carries the event ids of its dry run, as the admin API's body does.
const (
	maxLoginBody  = 8 << 10
	maxActionBody = 16 << 20
)

// formError is a form the console refuses to read, with its HTTP status (413, 415 or 400).
type formError struct {
	code int
	err  error
}

func (e formError) Error() string { return e.err.Error() }

// readForm parses r's body as an urlencoded form of at most limit bytes, before anything else
// reads it: another content type (a multipart form included) is refused unread (415), a body
// whose Content-Length passes the limit unread, and a longer body without one once the limit is
// read (413).
func readForm(w http.ResponseWriter, r *http.Request, limit int64) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return formError{http.StatusUnsupportedMediaType,
			fmt.Errorf("the form must be application/x-www-form-urlencoded, not %q", r.Header.Get("Content-Type"))}
	}
	if r.ContentLength > limit {
		return formError{http.StatusRequestEntityTooLarge, fmt.Errorf("the form has %d bytes, more than %d", r.ContentLength, limit)}
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if err := r.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return formError{http.StatusRequestEntityTooLarge, fmt.Errorf("the form has more than %d bytes", limit)}
		}
		return formError{http.StatusBadRequest, fmt.Errorf("the form: %w", err)}
	}
	return nil
}
