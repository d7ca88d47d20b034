// Package monitoring tests the relay's monitoring artifacts under deploy/ (the Prometheus alert
// rules, their promtool unit tests, the Grafana dashboard and its provisioning) and gives those
// tests their tools: running promtool, deriving a test copy of the rules with short thresholds,
// and running a real Prometheus server on a temporary configuration.
package monitoring
