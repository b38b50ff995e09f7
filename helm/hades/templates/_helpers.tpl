{{/* The chart's name. */}}
{{- define "hades.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every resource name: the release name, plus the chart's unless it already contains it. */}}
{{- define "hades.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels on every resource; pass (dict "root" $ "component" "api"). */}}
{{- define "hades.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "hades.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: hades
{{- end }}

{{/* The labels a component's selector matches; pass (dict "root" $ "component" "api"). */}}
{{- define "hades.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hades.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The Hades image, for every role. */}}
{{- define "hades.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* NATS_URL: the chart's NATS, or the one named in nats.url. */}}
{{- define "hades.natsUrl" -}}
{{- if .Values.nats.enabled }}
{{- printf "nats://%s-nats:4222" (include "hades.fullname" .) }}
{{- else }}
{{- required "nats.url is required when nats.enabled is false" .Values.nats.url }}
{{- end }}
{{- end }}

{{/* The ServiceAccount jobs' Pods run as. */}}
{{- define "hades.jobServiceAccount" -}}
{{- default (printf "%s-job" (include "hades.fullname" .)) .Values.jobPods.serviceAccount.name }}
{{- end }}

{{/* Whether the API serves the dashboard: hadesApi.dashboard.enabled, or an existing Secret named (as the product
description has it: "set hadesApi.dashboard.secretName ... the chart then wires the env"). "true" or "". */}}
{{- define "hades.dashboardOn" -}}
{{- if or .Values.hadesApi.dashboard.enabled .Values.hadesApi.dashboard.secretName }}true{{ end }}
{{- end }}

{{/* The Secret holding the dashboard's credentials: an existing one, or the chart's. */}}
{{- define "hades.dashboardSecret" -}}
{{- default (printf "%s-dashboard" (include "hades.fullname" .)) .Values.hadesApi.dashboard.secretName }}
{{- end }}

{{/* Fails the render on a value the chart cannot honour. */}}
{{- define "hades.checkValues" -}}
{{- if not (has .Values.execution.mode (list "executor" "operator")) }}
{{- fail (printf "execution.mode must be executor or operator, not %q" .Values.execution.mode) }}
{{- end }}
{{- $replicas := int .Values.nats.replicas }}
{{- if or (lt $replicas 1) (eq $replicas 2) }}
{{- fail "nats.replicas must be 1 or at least 3 (a JetStream cluster needs a quorum)" }}
{{- end }}
{{- $dashboard := .Values.hadesApi.dashboard }}
{{- if and $dashboard.enabled (not $dashboard.secretName) }}
{{- if not (and $dashboard.username $dashboard.passwordHash $dashboard.sessionSecret) }}
{{- fail "hadesApi.dashboard: set secretName, or username, passwordHash and sessionSecret" }}
{{- end }}
{{- if lt (len $dashboard.sessionSecret) 32 }}
{{- fail "hadesApi.dashboard.sessionSecret must be at least 32 characters" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Copies of every stream, bucket and object store: streams.replicas, else the chart's NATS servers when they
are a cluster (capped at JetStream's 5), else unset (streams.yaml's own count). */}}
{{- define "hades.streamReplicas" -}}
{{- if .Values.streams.replicas -}}
{{ .Values.streams.replicas }}
{{- else if and .Values.nats.enabled (gt (int .Values.nats.replicas) 1) -}}
{{ min (int .Values.nats.replicas) 5 }}
{{- end -}}
{{- end }}

{{/* Env of every Hades container. */}}
{{- define "hades.env" -}}
- name: NATS_URL
  value: {{ include "hades.natsUrl" . | quote }}
- name: PYTHONDONTWRITEBYTECODE
  value: "1"
{{- if .Values.streams.existingConfigMap }}
- name: HADES_STREAMS_FILE
  value: /etc/hades/streams.yaml
{{- end }}
{{- with include "hades.streamReplicas" . }}
- name: HADES_STREAM_REPLICAS
  value: {{ . | quote }}
{{- end }}
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* HADES_API_URL for the roles that make jobs' Pods (the executor, the operator): what a pipeline's stage is given to
call the API back, so the API's Service, unless env or extraEnv set it. */}}
{{- define "hades.stageApiUrl" -}}
{{- $named := hasKey .Values.env "HADES_API_URL" }}
{{- range .Values.extraEnv }}
{{- if eq .name "HADES_API_URL" }}{{ $named = true }}{{ end }}
{{- end }}
{{- if not $named }}
- name: HADES_API_URL
  value: {{ printf "http://%s-api.%s.svc:%v" (include "hades.fullname" .) .Release.Namespace .Values.hadesApi.service.port | quote }}
{{- end }}
{{- end }}

{{/* Mounts of every Hades container: a writable /tmp, and the streams.yaml when one is given. */}}
{{- define "hades.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .Values.streams.existingConfigMap }}
- name: streams
  mountPath: /etc/hades
  readOnly: true
{{- end }}
{{- end }}

{{/* Volumes of every Hades pod. */}}
{{- define "hades.volumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 256Mi
{{- with .Values.streams.existingConfigMap }}
- name: streams
  configMap:
    name: {{ . }}
{{- end }}
{{- end }}

{{/* The pod-level fields every Hades pod shares, and the init container applying the topology. */}}
{{- define "hades.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  {{- include "hades.volumes" . | nindent 2 }}
{{- if .Values.streams.applyOnStart }}
initContainers:
  - name: streams-apply
    image: {{ include "hades.image" . }}
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    args: [streams, apply]
    env:
      {{- include "hades.env" . | nindent 6 }}
    securityContext:
      {{- toYaml .Values.securityContext | nindent 6 }}
    volumeMounts:
      {{- include "hades.volumeMounts" . | nindent 6 }}
    resources:
      requests: {cpu: 50m, memory: 96Mi}
      limits: {memory: 256Mi}
{{- end }}
{{- end }}

{{/* The container fields every Hades container shares. */}}
{{- define "hades.containerCommon" -}}
image: {{ include "hades.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
volumeMounts:
  {{- include "hades.volumeMounts" . | nindent 2 }}
{{- end }}

{{/* Liveness and readiness of a role without the API: its /metrics server answers. */}}
{{- define "hades.metricsProbes" -}}
ports:
  - name: metrics
    containerPort: {{ .Values.metrics.port }}
livenessProbe:
  httpGet: {path: /metrics, port: metrics}
  initialDelaySeconds: 10
  periodSeconds: 20
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /health, port: metrics}
  periodSeconds: 10
{{- end }}

{{/* A Pod per job: created, watched, read, deleted on cancel and cleanup; its containers' logs followed. */}}
{{- define "hades.podRules" }}
  - apiGroups: [""]
    resources: [pods]
    verbs: [create, get, list, watch, delete]
  - apiGroups: [""]
    resources: [pods/log]
    verbs: [get]
{{- end }}
