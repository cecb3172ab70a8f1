{{/* Names, labels and the values every template shares. */}}

{{- define "llmgw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* <release>-llmgw, or the release name alone when it already says llmgw; 63 characters at most. */}}
{{- define "llmgw.fullname" -}}
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

{{- define "llmgw.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "llmgw.selectorLabels" -}}
app.kubernetes.io/name: {{ include "llmgw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: control-plane
{{- end }}

{{- define "llmgw.labels" -}}
helm.sh/chart: {{ include "llmgw.chart" . }}
{{ include "llmgw.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: llmgw
{{- end }}

{{- define "llmgw.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "llmgw.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "llmgw.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Where llmgw's model objects go: kubernetes.namespace, else the release's. */}}
{{- define "llmgw.modelNamespace" -}}
{{- default .Release.Namespace .Values.kubernetes.namespace }}
{{- end }}

{{/*
The Secret llmgw makes at its first start for the admin key and the engine key secret, when
values name no existing one for them (the chart renders no random value: GitOps tools render
without a cluster). Its name is the Secret's that earlier charts made, so an upgrade reads it.
*/}}
{{- define "llmgw.secretName" -}}
{{- include "llmgw.fullname" . }}
{{- end }}

{{/* "true" when llmgw keeps a key of its own in llmgw.secretName. */}}
{{- define "llmgw.ownsKeys" -}}
{{- if or (not .Values.adminKey.existingSecret) (not .Values.engineKeySecret.existingSecret) }}true{{- end }}
{{- end }}

{{- define "llmgw.dataClaim" -}}
{{- default (printf "%s-data" (include "llmgw.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

{{- define "llmgw.modelsClaim" -}}
{{- .Values.kubernetes.models.pvc }}
{{- end }}

{{/*
Refusals: values that render, but that llmgw would refuse or that cannot run, fail the
install here with what to set.
*/}}
{{- define "llmgw.validate" -}}
{{- if eq .Values.database.type "postgresql" }}
{{- $_ := required "database.existingSecret is required with database.type postgresql: the name of a Secret whose key database.secretKey (url) holds postgres://user:password@host:5432/llmgw" .Values.database.existingSecret }}
{{- else if gt (int .Values.replicaCount) 1 }}
{{- fail (printf "replicaCount is %d, but the embedded SQLite database serves one control plane: set replicaCount: 1, or database.type: postgresql with database.existingSecret for several" (int .Values.replicaCount)) }}
{{- end }}
{{- if .Values.inferencePool.enabled }}
{{- $_ := required "inferencePool.model is required with inferencePool.enabled: the llmgw model whose engine pods form the pool" .Values.inferencePool.model }}
{{- $_ := required "inferencePool.endpointPicker.service is required with inferencePool.enabled: the Service of the pool's endpoint picker (EPP)" .Values.inferencePool.endpointPicker.service }}
{{- end }}
{{- if and .Values.kubernetes.models.create (not .Values.kubernetes.models.pvc) }}
{{- fail "kubernetes.models.create makes the claim named by kubernetes.models.pvc: set kubernetes.models.pvc too, e.g. llmgw-models" }}
{{- end }}
{{- end }}

{{/* llmgw's settings file: the chart's keys, with .Values.settings merged over them. */}}
{{- define "llmgw.settings" -}}
{{- $fullname := include "llmgw.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- $models := dict "mount_path" .Values.kubernetes.models.mountPath }}
{{- if .Values.kubernetes.models.pvc }}
{{- $_ := set $models "pvc" .Values.kubernetes.models.pvc }}
{{- else }}
{{- $_ := set $models "downloader_image" (default (include "llmgw.image" .) .Values.kubernetes.models.downloaderImage) }}
{{- end }}
{{- $kube := dict "namespace" (include "llmgw.modelNamespace" .) "models" $models "engine_port" (int .Values.kubernetes.enginePort) }}
{{- with .Values.kubernetes.runtimeClass }}
{{- $_ := set $kube "runtime_class" . }}
{{- end }}
{{- with .Values.kubernetes.serviceAccount }}
{{- $_ := set $kube "service_account" . }}
{{- end }}
{{- if include "llmgw.ownsKeys" . }}
{{- $_ := set $kube "keys_secret" (dict "name" (include "llmgw.secretName" .) "namespace" $ns) }}
{{- end }}
{{- $san := list $fullname (printf "%s.%s" $fullname $ns) (printf "%s.%s.svc" $fullname $ns) (printf "%s.%s.svc.cluster.local" $fullname $ns) }}
{{- range .Values.tls.san }}
{{- $san = append $san . }}
{{- end }}
{{- $tls := dict "enabled" .Values.tls.enabled }}
{{- if .Values.tls.enabled }}
{{- $_ := set $tls "san" $san }}
{{- if .Values.tls.existingSecret }}
{{- $_ := set $tls "cert" "/etc/llmgw/tls/tls.crt" }}
{{- $_ := set $tls "key" "/etc/llmgw/tls/tls.key" }}
{{- end }}
{{- end }}
{{- $s := dict "listen" (printf "0.0.0.0:%d" (int .Values.service.port)) "data_dir" "/var/lib/llmgw/data" "tls" $tls "kubernetes" $kube }}
{{- if ne .Values.database.type "postgresql" }}
{{- $_ := set $s "database" "sqlite:/var/lib/llmgw/data/llmgw.db" }}
{{- end }}
{{- toYaml (mergeOverwrite $s (deepCopy .Values.settings)) }}
{{- end }}
