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
OUTBOXKIT_DATABASE_DSN OUTBOXKIT_KAFKA_SASL_PASSWORD OUTBOXKIT_PULSAR_AUTH_TOKEN OUTBOXKIT_NATS_PASSWORD OUTBOXKIT_NATS_TOKEN OUTBOXKIT_RABBITMQ_AMQP_URL OUTBOXKIT_RABBITMQ_PASSWORD OUTBOXKIT_ADMIN_READ_TOKENS OUTBOXKIT_ADMIN_WRITE_TOKENS
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
      (list "rabbitmq" "password" "OUTBOXKIT_RABBITMQ_PASSWORD") -}}
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
{{- end -}}

{{/* The relay's configuration file: config with http.listen on containerPort. */}}
{{- define "outboxkit.config" -}}
{{- include "outboxkit.validate" . -}}
{{- $cfg := deepCopy (.Values.config | default dict) -}}
{{- $http := get $cfg "http" | default dict -}}
{{- $_ := set $http "listen" (printf ":%d" (int .Values.containerPort)) -}}
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
