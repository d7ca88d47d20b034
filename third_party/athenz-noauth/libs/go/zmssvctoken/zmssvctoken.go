// Package zmssvctoken is a stand-in for AthenZ's package of the same path: the names
// pulsar-client-go's AthenZ provider uses, without an implementation (see the module's README).
package zmssvctoken

import (
	"errors"
	"time"
)

// ErrNotBuiltIn is returned by every constructor: this binary was built without AthenZ.
var ErrNotBuiltIn = errors.New("AthenZ authentication is not built into this binary (outboxkit offers Pulsar token and TLS authentication)")

// Token is an ntoken source.
type Token interface {
	// Value returns the current token.
	Value() (string, error)
}

// TokenBuilder sets the optional attributes of an ntoken and returns its Token.
type TokenBuilder interface {
	SetExpiration(t time.Duration)
	SetHostname(h string)
	SetIPAddress(ip string)
	SetKeyService(keyService string)
	Token() Token
}

// NewTokenBuilder returns ErrNotBuiltIn.
func NewTokenBuilder(domain, name string, privateKeyPEM []byte, keyVersion string) (TokenBuilder, error) {
	return nil, ErrNotBuiltIn
}
