package nats

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"

	natsgo "github.com/nats-io/nats.go"

	"github.com/outboxkit/outboxkit/brokers/internal/tlsfiles"
)

// options returns the nats.go connection options of the configuration.
func (c Config) options() ([]natsgo.Option, error) {
	opts := []natsgo.Option{
		natsgo.Name(c.Name),
		natsgo.Timeout(c.ConnectTimeout),
		natsgo.ReconnectWait(c.ReconnectWait),
		natsgo.MaxReconnects(-1),
	}
	switch {
	case c.Username != "":
		opts = append(opts, natsgo.UserInfo(c.Username, c.Password))
	case c.Token != "":
		opts = append(opts, natsgo.Token(c.Token))
	case c.NKeySeedFile != "":
		opt, err := natsgo.NkeyOptionFromSeed(c.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nkey_seed_file %s: cannot read the seed: %w", c.NKeySeedFile, errors.Unwrap(err))
		}
		opts = append(opts, opt)
	case c.CredentialsFile != "":
		if _, err := os.Stat(c.CredentialsFile); err != nil {
			return nil, fmt.Errorf("credentials_file: %w", err)
		}
		opts = append(opts, natsgo.UserCredentials(c.CredentialsFile))
	}
	if c.TLS.On() {
		tc, err := c.TLS.config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, natsgo.Secure(tc))
	}
	return opts, nil
}

// config builds the *tls.Config.
func (t TLSConfig) config() (*tls.Config, error) {
	return tlsfiles.Config(t.CAFile, t.CertFile, t.KeyFile, "", t.InsecureSkipVerify)
}

// connect opens a connection with the configuration (defaults applied by the caller).
func (c Config) connect() (*natsgo.Conn, error) {
	opts, err := c.options()
	if err != nil {
		return nil, err
	}
	urls := make([]string, len(c.URLs))
	for i, u := range c.URLs {
		urls[i] = strings.TrimSpace(u)
	}
	nc, err := natsgo.Connect(strings.Join(urls, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("nats: connect to %s: %w", c.redactedURLs(), err)
	}
	return nc, nil
}

func (c Config) redactedURLs() string {
	out := make([]string, len(c.URLs))
	for i, u := range c.URLs {
		out[i] = redactURL(u)
	}
	return strings.Join(out, ",")
}
