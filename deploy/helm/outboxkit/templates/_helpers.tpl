{{/* Name of the chart, or nameOverride. */}}
{{- define "outboxkit.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name of the release's objects: fullnameOverride, else release-chart (once). */}}
{{- define "outboxkit.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "outboxkit.selectorLabels" -}}
app.kubernetes.io/name: {{ include "outboxkit.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The relay pods' labels: the migrate Job's pods carry component=migrate instead. */}}
{{- define "outboxkit.relaySelectorLabels" -}}
{{ include "outboxkit.selectorLabels" . }}
app.kubernetes.io/component: relay
{{- end -}}

{{- define "outboxkit.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "outboxkit.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "outboxkit.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "outboxkit.secretName" -}}
{{- default (include "outboxkit.fullname" .) .Values.existingSecret.name -}}
{{- end -}}

{{/*
The relay's variables whose values are secrets: only existingSecret may set them (the chart
refuses them in extraEnv with a value in clear).
*/}}
{{- define "outboxkit.secretVariables" -}}
OUTBOXKIT_DATABASE_DSN OUTBOXKIT_KAFKA_SASL_PASSWORD OUTBOXKIT_PULSAR_AUTH_TOKEN OUTBOXKIT_NATS_PASSWORD OUTBOXKIT_NATS_TOKEN OUTBOXKIT_RABBITMQ_AMQP_URL OUTBOXKIT_RABBITMQ_PASSWORD OUTBOXKIT_SCHEMA_REGISTRY_PASSWORD OUTBOXKIT_SCHEMA_REGISTRY_BEARER_TOKEN OUTBOXKIT_ADMIN_READ_TOKENS OUTBOXKIT_ADMIN_WRITE_TOKENS
{{- end -}}

{{/* Fails the render when values carry a secret in clear or ask for what the chart owns. */}}
{{- define "outboxkit.validate" -}}
{{- $cfg := .Values.config | default dict -}}
{{- $refused := list
      (list "database" "dsn" "OUTBOXKIT_DATABASE_DSN")
      (list "kafka.sasl" "password" "OUTBOXKIT_KAFKA_SASL_PASSWORD")
      (list "pulsar" "auth_token" "OUTBOXKIT_PULSAR_AUTH_TOKEN")
      (list "nats" "password" "OUTBOXKIT_NATS_PASSWORD")
      (list "nats" "token" "OUTBOXKIT_NATS_TOKEN")
      (list "rabbitmq" "password" "OUTBOXKIT_RABBITMQ_PASSWORD")
      (list "schema_registry" "password" "OUTBOXKIT_SCHEMA_REGISTRY_PASSWORD")
      (list "schema_registry" "bearer_token" "OUTBOXKIT_SCHEMA_REGISTRY_BEARER_TOKEN") -}}
{{- range $refused -}}
{{- $section := $cfg -}}
{{- range (splitList "." (index . 0)) -}}
{{- $section = (get ($section | default dict) .) -}}
{{- end -}}
{{- if and (kindIs "map" $section) (hasKey $section (index . 1)) -}}
{{- fail (printf "config.%s.%s: a secret does not belong in values; put it in the Secret and map %s in existingSecret.env" (index . 0) (index . 1) (index . 2)) -}}
{{- end -}}
{{- end -}}
{{- $rabbit := get $cfg "rabbitmq" | default dict -}}
{{- if and (kindIs "map" $rabbit) (regexMatch "://[^/@:]*:[^/@]*@" (toString (get $rabbit "url"))) -}}
{{- fail "config.rabbitmq.url: a URL with a password does not belong in values; put it in the Secret and map OUTBOXKIT_RABBITMQ_AMQP_URL in existingSecret.env" -}}
{{- end -}}
{{- $http := get $cfg "http" | default dict -}}
{{- if and (kindIs "map" $http) (hasKey $http "listen") -}}
{{- fail "config.http.listen: set by the chart from containerPort; remove it from config" -}}
{{- end -}}
{{- range list "admin_listen" "admin_tls_cert_file" "admin_tls_key_file" "admin_client_ca_file" "allowed_hosts" -}}
{{- if and (kindIs "map" $http) (hasKey $http .) -}}
{{- fail (printf "config.http.%s: set by the chart from admin.* (admin.containerPort, admin.tls, admin.extraAllowedHosts); remove it from config" .) -}}
{{- end -}}
{{- end -}}
{{- $secretVars := splitList " " (include "outboxkit.secretVariables" .) -}}
{{- range .Values.extraEnv -}}
{{- if and (has .name $secretVars) (hasKey . "value") -}}
{{- fail (printf "extraEnv %s: a secret in clear; map it to a key of the Secret in existingSecret.env" .name) -}}
{{- end -}}
{{- end -}}
{{- range $var, $key := .Values.existingSecret.env -}}
{{- if not (hasPrefix "OUTBOXKIT_" $var) -}}
{{- fail (printf "existingSecret.env %s: not a variable of the relay (they start with OUTBOXKIT_)" $var) -}}
{{- end -}}
{{- if not $key -}}
{{- fail (printf "existingSecret.env %s: the key of the Secret is empty" $var) -}}
{{- end -}}
{{- end -}}
{{- $adminTokens := or (hasKey .Values.existingSecret.env "OUTBOXKIT_ADMIN_READ_TOKENS") (hasKey .Values.existingSecret.env "OUTBOXKIT_ADMIN_WRITE_TOKENS") -}}
{{- $adminFiles := and (kindIs "map" $http) (or (hasKey $http "admin_read_tokens_file") (hasKey $http "admin_write_tokens_file")) -}}
{{- if and .Values.admin.enabled (not (or $adminTokens $adminFiles)) -}}
{{- fail "admin.enabled: the admin API needs tokens; map OUTBOXKIT_ADMIN_READ_TOKENS or OUTBOXKIT_ADMIN_WRITE_TOKENS in existingSecret.env" -}}
{{- end -}}
{{- if and (not .Values.admin.enabled) (or $adminTokens $adminFiles) -}}
{{- fail "admin.enabled is false but admin tokens are configured: set admin.enabled=true to serve the admin API, or remove the tokens" -}}
{{- end -}}
{{- if .Values.admin.enabled -}}
{{- if eq (int .Values.admin.containerPort) (int .Values.containerPort) -}}
{{- fail (printf "admin.containerPort %d: the admin listener needs a port of its own, not containerPort (the probes' plain port)" (int .Values.admin.containerPort)) -}}
{{- end -}}
{{- if and .Values.admin.tls.enabled (not .Values.admin.tls.existingSecret) -}}
{{- fail "admin.tls.existingSecret: the admin listener serves TLS from a kubernetes.io/tls Secret (tls.crt, tls.key); name it, or set admin.tls.enabled=false to acknowledge a plain-HTTP admin port (docs/security.md)" -}}
{{- end -}}
{{- if and (not .Values.admin.tls.enabled) .Values.admin.tls.clientCA.existingSecret -}}
{{- fail "admin.tls.clientCA.existingSecret: client certificates need TLS; set admin.tls.enabled=true with admin.tls.existingSecret" -}}
{{- end -}}
{{- range .Values.admin.extraAllowedHosts -}}
{{- if regexMatch "[:/ ]" . -}}
{{- fail (printf "admin.extraAllowedHosts %q: a host name, without scheme or port" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Where the admin listener's TLS files are mounted (docs/security.md's recipe). */}}
{{- define "outboxkit.adminTLSDir" -}}/run/tls{{- end -}}
{{- define "outboxkit.adminClientCADir" -}}/run/tls-client-ca{{- end -}}

{{/* The DNS names of the release's Service, then admin.extraAllowedHosts: http.allowed_hosts. */}}
{{- define "outboxkit.allowedHosts" -}}
{{- $svc := include "outboxkit.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $hosts := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.admin.clusterDomain) -}}
{{- toYaml (concat $hosts (.Values.admin.extraAllowedHosts | default list) | uniq) -}}
{{- end -}}

{{/* The relay's configuration file: config with http.listen on containerPort and, with
admin.enabled, the admin listener's settings. */}}
{{- define "outboxkit.config" -}}
{{- include "outboxkit.validate" . -}}
{{- $cfg := deepCopy (.Values.config | default dict) -}}
{{- $http := get $cfg "http" | default dict -}}
{{- $_ := set $http "listen" (printf ":%d" (int .Values.containerPort)) -}}
{{- if .Values.admin.enabled -}}
{{- $_ = set $http "admin_listen" (printf ":%d" (int .Values.admin.containerPort)) -}}
{{- $_ = set $http "allowed_hosts" (include "outboxkit.allowedHosts" . | fromYamlArray) -}}
{{- if .Values.admin.tls.enabled -}}
{{- $_ = set $http "admin_tls_cert_file" (printf "%s/tls.crt" (include "outboxkit.adminTLSDir" .)) -}}
{{- $_ = set $http "admin_tls_key_file" (printf "%s/tls.key" (include "outboxkit.adminTLSDir" .)) -}}
{{- if .Values.admin.tls.clientCA.existingSecret -}}
{{- $_ = set $http "admin_client_ca_file" (printf "%s/%s" (include "outboxkit.adminClientCADir" .) .Values.admin.tls.clientCA.key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $_ = set $cfg "http" $http -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* Environment of the relay and the migrate Job: the Secret's keys, then extraEnv. */}}
{{- define "outboxkit.env" -}}
{{- $secret := include "outboxkit.secretName" . -}}
{{- range $var, $key := .Values.existingSecret.env }}
- name: {{ $var }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $key | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Volume mounts of the relay and the migrate Job. */}}
{{- define "outboxkit.volumeMounts" -}}
- name: config
  mountPath: /etc/outboxkit
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Pod-level settings shared by the relay and the migrate Job. */}}
{{- define "outboxkit.podSpecCommon" -}}
automountServiceAccountToken: false
{{- with .Values.serviceAccountName }}
serviceAccountName: {{ . }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{ toYaml . }}
{{- end }}
securityContext:
{{ toYaml .Values.podSecurityContext | indent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
{{ toYaml . | indent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
{{ toYaml . }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}


{{/* The relay's volume mounts of the admin listener's TLS files (none without them). */}}
{{- define "outboxkit.adminVolumeMounts" -}}
{{- if and .Values.admin.enabled .Values.admin.tls.enabled }}
- name: admin-tls
  mountPath: {{ include "outboxkit.adminTLSDir" . }}
  readOnly: true
{{- if .Values.admin.tls.clientCA.existingSecret }}
- name: admin-client-ca
  mountPath: {{ include "outboxkit.adminClientCADir" . }}
  readOnly: true
{{- end }}
{{- end }}
{{- end -}}

{{/* The relay's volumes of the admin listener's TLS files: keys of Secrets, never values. */}}
{{- define "outboxkit.adminVolumes" -}}
{{- if and .Values.admin.enabled .Values.admin.tls.enabled }}
- name: admin-tls
  secret:
    secretName: {{ .Values.admin.tls.existingSecret }}
    defaultMode: 0440
    items:
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
{{- with .Values.admin.tls.clientCA.existingSecret }}
- name: admin-client-ca
  secret:
    secretName: {{ . }}
    defaultMode: 0440
    items:
      - key: {{ $.Values.admin.tls.clientCA.key | quote }}
        path: {{ $.Values.admin.tls.clientCA.key | quote }}
{{- end }}
{{- end }}
{{- end -}}
