// Package ztsroletoken is a stand-in for AthenZ's package of the same path: the names
// pulsar-client-go's AthenZ provider uses, without an implementation (see the module's README).
package ztsroletoken

import (
	"time"

	"github.com/AthenZ/athenz/libs/go/zmssvctoken"
)

// RoleToken is a role token source.
type RoleToken interface {
	RoleTokenValue() (string, error)
	StartPrefetcher() error
	StopPrefetcher() error
}

// RoleTokenOptions has the fields of AthenZ's options that pulsar-client-go sets.
type RoleTokenOptions struct {
	BaseZTSURL       string
	ProxyURL         string
	Role             string
	MinExpire        time.Duration
	MaxExpire        time.Duration
	AuthHeader       string
	CACert           []byte
	PrefetchInterval time.Duration
}

// NoRoleToken is the RoleToken of this stand-in: every method returns
// zmssvctoken.ErrNotBuiltIn.
type NoRoleToken struct{}

// RoleTokenValue returns zmssvctoken.ErrNotBuiltIn.
func (NoRoleToken) RoleTokenValue() (string, error) { return "", zmssvctoken.ErrNotBuiltIn }

// StartPrefetcher returns zmssvctoken.ErrNotBuiltIn.
func (NoRoleToken) StartPrefetcher() error { return zmssvctoken.ErrNotBuiltIn }

// StopPrefetcher returns nil: nothing was started.
func (NoRoleToken) StopPrefetcher() error { return nil }

// NewRoleToken returns a RoleToken that fails with zmssvctoken.ErrNotBuiltIn.
func NewRoleToken(tok zmssvctoken.Token, domain string, opts RoleTokenOptions) *NoRoleToken {
	return &NoRoleToken{}
}

// NewRoleTokenFromCert returns a RoleToken that fails with zmssvctoken.ErrNotBuiltIn.
func NewRoleTokenFromCert(certFile, keyFile, domain string, opts RoleTokenOptions) *NoRoleToken {
	return &NoRoleToken{}
}
