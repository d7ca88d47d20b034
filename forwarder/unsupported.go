package forwarder

import "errors"

// ErrUnsupported is wrapped by Config.Validate's (and New's) error when the configuration
// combines a source with a setting it does not support (for example Source wal with Tenants):
// a caller tells that refusal from a bad value with errors.Is, not by its wording.
var ErrUnsupported = errors.New("not supported on this source")
