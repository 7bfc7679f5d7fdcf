{{/* The release's full name: the release name, or <release>-carpentry-controller when the
release name does not already say it. */}}
{{- define "carpentry.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "carpentry.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "carpentry.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "carpentry.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "carpentry.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "carpentry.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: the ServiceAccount to run as, when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "carpentry.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Settings this controller version does not read fail the install instead of being ignored. */}}
{{- define "carpentry.checkSettings" -}}
{{- if and .Values.settings.interruptionQueue (ne .Values.settings.cloudProvider "aws") -}}
{{- fail "settings.interruptionQueue: only the aws provider reads an interruption queue (EC2's interruption events); leave it empty with settings.cloudProvider=kwok" -}}
{{- end -}}
{{- if and (ne .Values.settings.cloudProvider "aws") (or .Values.settings.clusterEndpoint .Values.settings.clusterCABundle) -}}
{{- fail "settings.clusterEndpoint, settings.clusterCABundle: only the aws provider writes nodes' bootstrap data; leave them empty with settings.cloudProvider=kwok" -}}
{{- end -}}
{{- if and (eq .Values.settings.cloudProvider "aws") (not .Values.settings.clusterName) -}}
{{- fail "settings.clusterName: the EKS cluster's name is required with settings.cloudProvider=aws (instances are tagged with it)" -}}
{{- end -}}
{{- end -}}
