{{/* Names and labels. Kept small: every object is otherwise written out in its own template. */}}
{{- define "magma.scheduler.fullname" -}}{{ .Release.Name }}-agent-scheduler{{- end -}}
{{- define "magma.shardctl.fullname" -}}{{ .Release.Name }}-shard-controller{{- end -}}
{{- define "magma.scheduler.sa" -}}{{ .Values.serviceAccount.schedulerName | default (include "magma.scheduler.fullname" .) }}{{- end -}}
{{- define "magma.shardctl.sa" -}}{{ .Values.serviceAccount.shardControllerName | default (include "magma.shardctl.fullname" .) }}{{- end -}}
{{- define "magma.scheduler.lease" -}}{{ .Values.scheduler.leaderElection.resourceName | default .Values.scheduler.name }}{{- end -}}
{{- define "magma.scheduler.leaseNamespace" -}}{{ .Values.scheduler.leaderElection.namespace | default .Release.Namespace }}{{- end -}}
{{- define "magma.shardctl.leaseNamespace" -}}{{ .Values.shardController.leaderElection.namespace | default .Release.Namespace }}{{- end -}}
{{- define "magma.sharding.configmap" -}}{{ .Values.sharding.configMapName }}{{- end -}}
{{- define "magma.image" -}}{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{- end -}}
{{- define "magma.labels" -}}
app.kubernetes.io/part-of: magma
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}
{{- define "magma.scheduler.selector" -}}
app.kubernetes.io/name: agent-scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- define "magma.shardctl.selector" -}}
app.kubernetes.io/name: shard-controller
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
