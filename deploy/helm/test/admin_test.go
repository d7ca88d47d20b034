package charttest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
)

// adminValues are values with the admin API on, tokens from the Secret, and extra on top.
func adminValues(t *testing.T, extra string) common.Values {
	t.Helper()
	vals, err := common.ReadValues([]byte(`existingSecret: {env: {OUTBOXKIT_DATABASE_DSN: dsn, OUTBOXKIT_ADMIN_WRITE_TOKENS: write-tokens}}
admin: {enabled: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	over, err := common.ReadValues([]byte(extra))
	if err != nil {
		t.Fatal(err)
	}
	return common.Values(util.MergeTables(over, vals))
}

// secretVolumeAt returns the Secret volume mounted at dir in the relay's container (nil when
// none is), failing when that mount is writable.
func secretVolumeAt(t *testing.T, dep object, dir string) map[string]any {
	t.Helper()
	var name string
	for _, m := range list(container(t, dep), "volumeMounts") {
		if str(m, "mountPath") == dir {
			name = str(m, "name")
			if at(m, "readOnly") != true {
				t.Errorf("the volume at %s is not mounted read-only", dir)
			}
		}
	}
	for _, v := range list(dep.Doc, "spec", "template", "spec", "volumes") {
		if name != "" && str(v, "name") == name {
			s, _ := at(v, "secret").(map[string]any)
			return s
		}
	}
	return nil
}

// dirOf is the folder of a file path.
func dirOf(file string) string { return file[:strings.LastIndex(file, "/")] }

// TestAdminListenerFollowsTheSecurityRecipe: with admin.enabled the chart follows
// docs/security.md's deployment recipe: the admin routes get http.admin_listen on a container
// port of their own, which the Service's admin port reaches, while the probes stay on the plain
// http.listen port; TLS's certificate and key (and the client CA) are files of Secrets mounted
// read-only where the configuration names them; http.allowed_hosts holds the Service's four DNS
// names and admin.extraAllowedHosts. (kubernetes-validate checks the same rendering through the
// nats case.)
func TestAdminListenerFollowsTheSecurityRecipe(t *testing.T) {
	r := render(t, kubeVersions[0], adminValues(t, `admin:
  tls: {existingSecret: relay-tls, clientCA: {existingSecret: ops-ca}}
  extraAllowedHosts: [relay-admin.example.com]`))
	dep := r.find(t, "Deployment", "")
	ctr := container(t, dep)
	_, config := relayConfig(t, r, dep)
	h := httpOf(t, config)
	adminPort, listen := portOf(t, "http.admin_listen", h.AdminListen), portOf(t, "http.listen", h.Listen)
	if adminPort == listen || adminPort != containerPort(t, ctr, "admin") {
		t.Fatalf("http.admin_listen %q, http.listen %q, container port admin %d: want the admin port apart",
			h.AdminListen, h.Listen, containerPort(t, ctr, "admin"))
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		if port := containerPort(t, ctr, at(ctr, probe, "httpGet", "port")); port != listen {
			t.Errorf("%s on port %d, want the plain port %d", probe, port, listen)
		}
		if scheme := str(ctr, probe, "httpGet", "scheme"); scheme != "" && scheme != "HTTP" {
			t.Errorf("%s scheme %s", probe, scheme)
		}
	}
	svc := r.find(t, "Service", "")
	var svcAdmin bool
	for _, p := range list(svc.Doc, "spec", "ports") {
		if str(p, "name") == "admin" {
			svcAdmin = containerPort(t, ctr, at(p, "targetPort")) == adminPort
		}
	}
	if !svcAdmin {
		t.Errorf("the Service has no admin port reaching %d: %v", adminPort, at(svc.Doc, "spec", "ports"))
	}
	for _, f := range []struct{ file, secret, key string }{
		{h.AdminTLSCertFile, "relay-tls", "tls.crt"},
		{h.AdminTLSKeyFile, "relay-tls", "tls.key"},
		{h.AdminClientCAFile, "ops-ca", "ca.crt"},
	} {
		if f.file == "" || !strings.HasSuffix(f.file, "/"+f.key) {
			t.Errorf("the configuration names %q for %s of Secret %s", f.file, f.key, f.secret)
			continue
		}
		vol := secretVolumeAt(t, dep, dirOf(f.file))
		if str(vol, "secretName") != f.secret || !strings.Contains(fmt.Sprint(at(vol, "items")), "key:"+f.key) {
			t.Errorf("%s: no Secret volume of %s with key %s mounted at %s: %v", f.file, f.secret, f.key, dirOf(f.file), vol)
		}
	}
	want := append(serviceHosts(svc), "relay-admin.example.com")
	if !slices.Equal(h.AllowedHosts, want) {
		t.Errorf("http.allowed_hosts %v, want %v", h.AllowedHosts, want)
	}
	if !strings.Contains(r.Notes, "https://"+svc.name()+"."+releaseNamespace+".svc:") {
		t.Errorf("NOTES.txt does not give the admin console's https address:\n%s", r.Notes)
	}
}

// TestAdminWithoutTLSNeedsAnAcknowledgement: admin.enabled without a TLS Secret does not render
// (the message names admin.tls.existingSecret and the way out); admin.tls.enabled=false renders
// a plain admin listener, still on its own port with the Service's names allowed, mounts no TLS
// volume, and NOTES.txt says it is plain HTTP.
func TestAdminWithoutTLSNeedsAnAcknowledgement(t *testing.T) {
	_, err := tryRender(loadChart(t), kubeVersions[0], adminValues(t, "{}"))
	if err == nil || !strings.Contains(err.Error(), "admin.tls.existingSecret") || !strings.Contains(err.Error(), "admin.tls.enabled=false") {
		t.Fatalf("admin.enabled without TLS: error %v, want one naming admin.tls.existingSecret and admin.tls.enabled=false", err)
	}
	r := render(t, kubeVersions[0], adminValues(t, "admin: {tls: {enabled: false}}"))
	dep := r.find(t, "Deployment", "")
	_, config := relayConfig(t, r, dep)
	h := httpOf(t, config)
	if h.AdminListen == "" || h.AdminTLSCertFile != "" || h.AdminTLSKeyFile != "" || h.AdminClientCAFile != "" {
		t.Errorf("admin.tls.enabled=false: http section %+v", h)
	}
	if !slices.Equal(h.AllowedHosts, serviceHosts(r.find(t, "Service", ""))) {
		t.Errorf("http.allowed_hosts %v", h.AllowedHosts)
	}
	for _, v := range list(dep.Doc, "spec", "template", "spec", "volumes") {
		if at(v, "secret") != nil {
			t.Errorf("admin.tls.enabled=false mounts Secret volume %v", v)
		}
	}
	if !strings.Contains(r.Notes, "PLAIN HTTP") {
		t.Errorf("NOTES.txt does not say the admin port is plain HTTP:\n%s", r.Notes)
	}
}

// TestAdminSettingsTheChartOwnsAreRefused: the admin listener's settings come from admin.*, so
// the same keys in config, a shared port, client certificates without TLS and a host name with
// a port fail the render with a message naming them.
func TestAdminSettingsTheChartOwnsAreRefused(t *testing.T) {
	ch := loadChart(t)
	tls := "admin: {tls: {existingSecret: relay-tls}}\n"
	for _, tc := range []struct{ values, want string }{
		{tls + "config: {http: {admin_listen: ':8443'}}", "config.http.admin_listen"},
		{tls + "config: {http: {admin_tls_cert_file: /x/tls.crt}}", "config.http.admin_tls_cert_file"},
		{tls + "config: {http: {admin_tls_key_file: /x/tls.key}}", "config.http.admin_tls_key_file"},
		{tls + "config: {http: {admin_client_ca_file: /x/ca.crt}}", "config.http.admin_client_ca_file"},
		{tls + "config: {http: {allowed_hosts: [a.example]}}", "config.http.allowed_hosts"},
		{"admin: {containerPort: 9464, tls: {existingSecret: relay-tls}}", "admin.containerPort 9464"},
		{"admin: {tls: {enabled: false, clientCA: {existingSecret: ops-ca}}}", "admin.tls.clientCA.existingSecret"},
		{"admin: {tls: {existingSecret: relay-tls}, extraAllowedHosts: ['relay.example.com:9443']}", `admin.extraAllowedHosts "relay.example.com:9443"`},
		{"admin: {tls: {existingSecret: relay-tls, tlsKey: '-----BEGIN PRIVATE KEY-----'}}", "tlsKey"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, err := tryRender(ch, kubeVersions[0], adminValues(t, tc.values))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("values %s: error %v, want one naming %q", tc.values, err, tc.want)
			}
		})
	}
}
