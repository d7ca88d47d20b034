package nats_test

import (
	"context"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/brokers/nats"
	"github.com/outboxkit/outboxkit/internal/testsupport/natsserver"
)

// TestAuthentication: user/password and token against servers that require them; wrong
// credentials fail the constructor with an error that shows neither the secret nor a password
// given in the URL.
func TestAuthentication(t *testing.T) {
	const password, token = "pw-Secret-77", "tok-Secret-88"
	withUser := natsserver.Start(t, natsserver.Options{Username: "relay", Password: password})
	withToken := natsserver.Start(t, natsserver.Options{Token: token})
	for _, tc := range []struct {
		name string
		cfg  nats.Config
		ok   bool
	}{
		{"user/password", nats.Config{URLs: []string{withUser.URL()}, Username: "relay", Password: password}, true},
		{"token", nats.Config{URLs: []string{withToken.URL()}, Token: token}, true},
		{"wrong password", nats.Config{URLs: []string{withUser.URL()}, Username: "relay", Password: password + "x"}, false},
		{"wrong token", nats.Config{URLs: []string{withToken.URL()}, Token: token + "x"}, false},
		{"password in the URL", nats.Config{URLs: []string{strings.Replace(withUser.URL(), "nats://", "nats://relay:"+password+"x@", 1)}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub, err := nats.NewPublisher(tc.cfg, testLogger())
			if !tc.ok {
				if err == nil {
					_ = pub.Close()
					t.Fatal("connected with wrong credentials")
				}
				if strings.Contains(err.Error(), password) || strings.Contains(err.Error(), token) {
					t.Fatalf("error shows a secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("new publisher: %v", err)
			}
			defer pub.Close()
			if errs := pub.PublishEach(context.Background(), "auth", nil); len(errs) != 0 {
				t.Fatal("outcomes for no message")
			}
			if err := pub.Connect("auth"); err != nil {
				t.Fatalf("connect: %v", err)
			}
		})
	}
}
