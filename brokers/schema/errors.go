package schema

import (
	"errors"
	"fmt"
)

// MismatchError reports an event whose payload does not fit its schema: Path is where in the
// payload (a JSON path such as $.items[2].price), Reason what is wrong there. Sending the event
// again cannot succeed, so it is permanent (Retriable reports false).
type MismatchError struct {
	Subject string
	Path    string
	Reason  string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("payload does not fit the schema of subject %q at %s: %s", e.Subject, e.Path, e.Reason)
}

// RegistryError reports a failed schema lookup (the registry unreachable, slow, or without the
// subject or version asked for): retriable, since the registry or an operator can fix it.
type RegistryError struct {
	Subject string
	Err     error
}

func (e *RegistryError) Error() string {
	return fmt.Sprintf("schema registry lookup of subject %q: %v", e.Subject, e.Err)
}

func (e *RegistryError) Unwrap() error { return e.Err }

// Retriable reports whether an event that failed with err may be encoded when tried again:
// false only for a *MismatchError (the payload itself does not fit).
func Retriable(err error) bool {
	var mismatch *MismatchError
	return !errors.As(err, &mismatch)
}
