{{/* The release's name for every object: <release>-rewind, or the release's name when it already holds "rewind". */}}
{{- define "rewind.fullname" -}}
{{- if contains "rewind" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-rewind" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "rewind.headless" -}}
{{- printf "%s-headless" (include "rewind.fullname" .) -}}
{{- end -}}

{{- define "rewind.selectorLabels" -}}
app.kubernetes.io/name: rewind
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "rewind.labels" -}}
{{ include "rewind.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The address a member's peers and clients dial: its pod's stable name under the headless service. */}}
{{- define "rewind.memberHost" -}}
{{- printf "%s-%d.%s.%s.svc.%s" (include "rewind.fullname" .root) .ordinal (include "rewind.headless" .root) .root.Release.Namespace .root.Values.clusterDomain -}}
{{- end -}}

{{/* --initial-cluster: member N (node id N) is pod <fullname>-N (ordinals start at 1). */}}
{{- define "rewind.initialCluster" -}}
{{- $members := list -}}
{{- range $i := until (int .Values.replicas) -}}
{{- $id := add1 $i -}}
{{- $members = append $members (printf "%d=%s:%d" $id (include "rewind.memberHost" (dict "root" $ "ordinal" $id)) (int $.Values.port)) -}}
{{- end -}}
{{- join "," $members -}}
{{- end -}}

{{/* --allowed-hosts: the client service's names, and the values'. */}}
{{- define "rewind.allowedHosts" -}}
{{- $svc := include "rewind.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $hosts := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.clusterDomain) -}}
{{- join "," (concat $hosts .Values.allowedHosts) -}}
{{- end -}}

{{- define "rewind.clusterSecretName" -}}
{{- default (printf "%s-cluster" (include "rewind.fullname" .)) .Values.clusterSecret.existingSecret -}}
{{- end -}}

{{- define "rewind.scheme" -}}
{{- if .Values.tls.secretName }}HTTPS{{ else }}HTTP{{ end -}}
{{- end -}}

{{/* Refuse, at render time, what rewind serve would refuse at start. */}}
{{- define "rewind.validate" -}}
{{- if lt (int .Values.replicas) 1 -}}
{{- fail "replicas must be at least 1" -}}
{{- end -}}
{{- if and (not .Values.insecure) (not (and .Values.tls.secretName .Values.auth.enabled)) -}}
{{- fail "rewind serve refuses to listen on the pod network without TLS and client authentication: set tls.secretName (a Secret of the members' certificates: values.yaml) with auth.enabled=true, or insecure=true for a network you trust completely (docs/security.md)" -}}
{{- end -}}
{{- end -}}
