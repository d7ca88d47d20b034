package schema

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/twmb/franz-go/pkg/sr"
)

// MismatchError reports an event whose payload does not fit its schema: Subject and Version
// (0 when no schema was looked up, for example for an event without the event type its
// subject needs) name the schema, ID is its registry id, Path is where in the payload (a JSON
// path such as $.items[2].price), Reason what is wrong there. Sending the event again cannot
// succeed, so it is permanent (Retriable reports false).
//
// Its text names the subject and version first, in a form the admin API's failure groups keep
// whole, so that the events a schema change made invalid form
// one group per subject version, field path and reason.
type MismatchError struct {
	Subject string
	Version int
	ID      int
	Path    string
	Reason  string
}

func (e *MismatchError) Error() string {
	if e.Version == 0 {
		return fmt.Sprintf("payload does not fit the schema of subject %q at %s: %s", e.Subject, e.Path, e.Reason)
	}
	return fmt.Sprintf("payload does not fit the schema of subject %q version %d (schema id %d) at %s: %s",
		e.Subject, e.Version, e.ID, e.Path, e.Reason)
}

// RegistryError reports a failed schema lookup (the registry unreachable, slow, or without the
// subject, version or id asked for, or a registered schema that cannot be used): retriable, since
// the registry or an operator can fix it. Subject is set for an encoder's lookup, ID for a
// decoder's.
type RegistryError struct {
	Subject string
	ID      int
	Err     error
	// subjectFault marks a server error the registry has answered for this subject for longer
	// than the publisher's ServerErrorBound while it answered its health check: the subject's
	// failure, not an outage.
	subjectFault bool
}

func (e *RegistryError) Error() string {
	if e.Subject == "" {
		return fmt.Sprintf("schema registry lookup of schema id %d: %v", e.ID, e.Err)
	}
	return fmt.Sprintf("schema registry lookup of subject %q: %v", e.Subject, e.Err)
}

func (e *RegistryError) Unwrap() error { return e.Err }

// Unavailable reports whether the lookup failed because the registry did not answer: it could
// not be reached, did not answer in time, or answered that it cannot serve now (a 5xx status,
// 408 or 429). Such a failure says nothing about the event: the forwarder retries it without
// counting an attempt (Publisher.Unavailable). A registry that answers but has no such subject
// or version, or a schema that does not parse, is not unavailable: the event's attempts count,
// so that an event waiting for a schema nobody registers ends in the dead-letter topic. Nor is
// a server error (500, or another 5xx but 502, 503 and 504) that the registry has answered for
// one subject for longer than the publisher's ServerErrorBound while it answered its health
// check: the publisher marks such an error as the subject's failure.
func (e *RegistryError) Unavailable() bool {
	if e.subjectFault {
		return false
	}
	var resp *sr.ResponseError
	if errors.As(e.Err, &resp) {
		return resp.StatusCode >= http.StatusInternalServerError || resp.StatusCode == http.StatusTooManyRequests ||
			resp.StatusCode == http.StatusRequestTimeout
	}
	var netErr net.Error
	return errors.As(e.Err, &netErr) || errors.Is(e.Err, context.DeadlineExceeded)
}

// Retriable reports whether an event that failed with err may be encoded (or decoded) when
// tried again: false only for a *MismatchError (the payload itself does not fit) and a
// *DecodeError (the payload cannot be read).
func Retriable(err error) bool {
	var mismatch *MismatchError
	var decode *DecodeError
	return !errors.As(err, &mismatch) && !errors.As(err, &decode)
}
