{{/* The labels every object carries; the selector is the name label alone, as in the kustomize base. */}}
{{- define "pysched.labels" -}}
app.kubernetes.io/name: pysched
{{- end -}}

{{/* The profiles' scheduler names as a CEL list: ['a', 'b']. */}}
{{- define "pysched.schedulerNames" -}}
[{{ range $i, $p := .Values.profiles }}{{ if $i }}, {{ end }}'{{ $p.schedulerName }}'{{ end }}]
{{- end -}}

{{- define "pysched.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
