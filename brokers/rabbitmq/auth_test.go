package rabbitmq_test

import (
	"errors"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxkit/outboxkit/brokers/rabbitmq"
)

// TestAuthentication: username/password override the URL's; a wrong password is refused at
// NewPublisher with an error that is retriable (an operator fixes credentials) and does not
// contain the password.
func TestAuthentication(t *testing.T) {
	cfg := testConfig(t)
	u, err := amqp.ParseURI(cfg.URL)
	if err != nil {
		t.Fatal(err)
	}
	good := cfg
	good.URL = strings.Replace(cfg.URL, u.Username+":"+u.Password+"@", "", 1)
	good.Username, good.Password = u.Username, u.Password
	pub := newPublisher(t, good)
	if errs := pub.PublishEach(t.Context(), "auth.ok", nil); len(errs) != 0 {
		t.Fatal(errs)
	}
	bad := good
	bad.Password = "wrong-secret-1234"
	_, err = rabbitmq.NewPublisher(bad, testLogger())
	if err == nil {
		t.Fatal("a wrong password was accepted")
	}
	if strings.Contains(err.Error(), bad.Password) || !rabbitmq.Retriable(err) || !errors.Is(err, amqp.ErrCredentials) {
		t.Errorf("error %q: want ErrCredentials, retriable, without the password", err)
	}
	if s := bad.String(); strings.Contains(s, bad.Password) {
		t.Errorf("String() shows the password: %s", s)
	}
}
