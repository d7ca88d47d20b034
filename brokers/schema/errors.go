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
// subject, version or id asked for, or a registered schema that cannot be used): retriable, since
// the registry or an operator can fix it. Subject is set for an encoder's lookup, ID for a
// decoder's.
type RegistryError struct {
	Subject string
	ID      int
	Err     error
}

func (e *RegistryError) Error() string {
	if e.Subject == "" {
		return fmt.Sprintf("schema registry lookup of schema id %d: %v", e.ID, e.Err)
	}
	return fmt.Sprintf("schema registry lookup of subject %q: %v", e.Subject, e.Err)
}

func (e *RegistryError) Unwrap() error { return e.Err }

// Retriable reports whether an event that failed with err may be encoded (or decoded) when
// tried again: false only for a *MismatchError (the payload itself does not fit) and a
// *DecodeError (the payload cannot be read).
func Retriable(err error) bool {
	var mismatch *MismatchError
	var decode *DecodeError
	return !errors.As(err, &mismatch) && !errors.As(err, &decode)
}
