{{/* The release's full name: "graceful" for a release of that name. */}}
{{- define "graceful.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
The labels that select the agent's pods: deploy/base's, so that a release
can adopt a DaemonSet applied from deploy/base (a selector cannot change)
and take its nodes over by a rolling update. One agent runs per node, so
one release per cluster: the instance label is not needed to tell them apart.
*/}}
{{- define "graceful.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "graceful.labels" -}}
{{ include "graceful.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "graceful.serviceAccountName" -}}
{{- default (include "graceful.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* repository:tag, and @digest when one is set: the node pulls the digest. */}}
{{- define "graceful.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- with .Values.image.digest }}@{{ . }}{{ end -}}
{{- end -}}

{{/*
Whether the container's AppArmor profile is a securityContext field
(Kubernetes 1.30 and later; non-empty) or, before, an annotation (empty).
*/}}
{{- define "graceful.appArmorField" -}}
{{- if semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version }}true{{ end -}}
{{- end -}}

{{/* The `up` selector of the alerts: the job a ServiceMonitor or PodMonitor names. */}}
{{- define "graceful.jobSelector" -}}
{{- if .Values.metrics.prometheusRule.jobSelector -}}
{{- .Values.metrics.prometheusRule.jobSelector -}}
{{- else if .Values.metrics.podMonitor.enabled -}}
job="{{ .Release.Namespace }}/{{ include "graceful.fullname" . }}"
{{- else -}}
job="{{ include "graceful.fullname" . }}"
{{- end -}}
{{- end -}}
