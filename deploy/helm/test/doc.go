// Package charttest holds the tests of the Helm chart in deploy/helm/outboxkit: it renders the
// chart with Helm's Go library for the default values and every values file in the chart's ci/
// folder, validates each object against the Kubernetes schemas of several Kubernetes versions,
// and checks what the relay depends on (probes, configuration, secrets, security context).
package charttest
