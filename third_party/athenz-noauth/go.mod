// A stand-in for github.com/AthenZ/athenz, used by outboxkit's go.mod replace directive so that
// the outboxkit binary does not link AthenZ and, through it, k8s.io/client-go: pulsar-client-go's
// pulsar package imports its auth package, which imports the AthenZ provider unconditionally.
// outboxkit never configures the AthenZ provider (only token and TLS authentication), so these
// packages only have to compile; every function returns ErrNotBuiltIn.
module github.com/AthenZ/athenz

go 1.23
