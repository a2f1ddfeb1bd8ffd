{{/* The name of every object: fullnameOverride, else the chart name (lattice-operator). */}}
{{- define "lattice.fullname" -}}
{{- default .Chart.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "lattice.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "lattice.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end -}}

{{- define "lattice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "lattice.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* image: the seed chart's plain string, or {repository, tag}; the tag defaults to appVersion. */}}
{{- define "lattice.image" -}}
{{- if kindIs "string" .Values.image -}}
{{- if contains ":" (last (splitList "/" .Values.image)) -}}
{{- .Values.image -}}
{{- else -}}
{{- printf "%s:%s" .Values.image .Chart.AppVersion -}}
{{- end -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The node-selector file: one key=value line per operator.jobNodeSelector entry. */}}
{{- define "lattice.jobNodeSelector" -}}
{{- range $k, $v := .Values.operator.jobNodeSelector }}{{ printf "%s=%v\n" $k $v }}{{ end -}}
{{- end -}}

{{/* A list value as the comma-separated string the operator reads: a YAML list (or --set
     'key={a,b}') is joined; a string (`a,b`, or --set 'key=a\,b') is kept as it is. */}}
{{- define "lattice.commaList" -}}
{{- if kindIs "slice" . -}}{{- join "," . -}}{{- else -}}{{- toString . -}}{{- end -}}
{{- end -}}

{{/* rbac.scope, validated: cluster (one ClusterRole) or namespaced (Roles per monitorNamespace). */}}
{{- define "lattice.rbacScope" -}}
{{- $scope := default "cluster" .Values.rbac.scope -}}
{{- if not (has $scope (list "cluster" "namespaced")) -}}
{{- fail (printf "rbac.scope: must be cluster or namespaced (got %q)" $scope) -}}
{{- end -}}
{{- if and (eq $scope "namespaced") (not (include "lattice.watchNamespaces" . | trim)) -}}
{{- fail "rbac.scope=namespaced needs monitorNamespace: the namespaces to watch, comma separated" -}}
{{- end -}}
{{- $scope -}}
{{- end -}}

{{/* monitorNamespace (a list or a comma string) as one namespace a line, blanks dropped. */}}
{{- define "lattice.watchNamespaces" -}}
{{- range splitList "," (include "lattice.commaList" (default "" .Values.monitorNamespace)) }}{{ if trim . }}{{ trim . }}
{{ end }}{{ end -}}
{{- end -}}
