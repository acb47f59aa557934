{{/*
Names, labels and the gateway config the templates share.
*/}}

{{- define "anygpt-discovery.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's name for its objects: RELEASE-anygpt-discovery, or RELEASE when it already says so. */}}
{{- define "anygpt-discovery.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "anygpt-discovery.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "anygpt-discovery.labels" -}}
helm.sh/chart: {{ include "anygpt-discovery.chart" . }}
app.kubernetes.io/name: {{ include "anygpt-discovery.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The gateway pods. `component` keeps them apart from the bundled Redis pod. */}}
{{- define "anygpt-discovery.selectorLabels" -}}
app.kubernetes.io/name: {{ include "anygpt-discovery.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end }}

{{- define "anygpt-discovery.redisName" -}}
{{- printf "%s-redis" (include "anygpt-discovery.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "anygpt-discovery.redisSelectorLabels" -}}
app.kubernetes.io/name: {{ include "anygpt-discovery.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: redis
{{- end }}

{{- define "anygpt-discovery.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "anygpt-discovery.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret with the store's URL and encryption key the user creates. */}}
{{- define "anygpt-discovery.storeSecretName" -}}
{{- default (printf "%s-store" (include "anygpt-discovery.fullname" .)) .Values.store.existingSecret }}
{{- end }}

{{/* The Secret the chart generates for the bundled Redis: its password and a store key. */}}
{{- define "anygpt-discovery.bundledSecretName" -}}
{{- printf "%s-bundled" (include "anygpt-discovery.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "anygpt-discovery.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Where the config file is mounted (a ConfigMap volume: kubelet updates it in place). */}}
{{- define "anygpt-discovery.configDir" -}}/config{{- end }}
{{- define "anygpt-discovery.configFile" -}}mcp-discovery.config.json{{- end }}

{{/*
The URL clients use: `publicUrl`, else the first Ingress host's /mcp.
*/}}
{{- define "anygpt-discovery.publicUrl" -}}
{{- if .Values.publicUrl }}
{{- .Values.publicUrl }}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts }}
{{- $host := (first .Values.ingress.hosts).host }}
{{- $tls := false }}
{{- range .Values.ingress.tls }}
{{- if has $host (.hosts | default list) }}{{ $tls = true }}{{ end }}
{{- end }}
{{- printf "%s://%s/mcp" (ternary "https" "http" $tls) $host }}
{{- end }}
{{- end }}

{{/*
Every value the chart cannot serve, one message each, naming the value and the fix.
*/}}
{{- define "anygpt-discovery.problems" -}}
{{- $problems := list }}
{{- if not (include "anygpt-discovery.publicUrl" .) }}
{{- $problems = append $problems "publicUrl: set the URL clients use for /mcp (e.g. https://mcp.example.com/mcp), or enable the Ingress with a host; tokens must be issued for it" }}
{{- end }}
{{- if not .Values.auth.issuers }}
{{- $problems = append $problems "auth.issuers: name at least one OAuth issuer (issuer + jwksUri): the pods listen on a non-loopback address, which the gateway refuses without authentication (README \"Authentication (team mode)\")" }}
{{- end }}
{{- if hasKey .Values.auth "token" }}
{{- $problems = append $problems "auth.token: a static bearer token is for one user on loopback and is refused on the pods' address; use auth.issuers" }}
{{- end }}
{{- $config := .Values.config | default dict }}
{{- if hasKey $config "store" }}
{{- $problems = append $problems "config.store: the chart writes discovery.store from store.*; remove config.store" }}
{{- end }}
{{- $http := get $config "http" | default dict }}
{{- range $owned := list "publicUrl" "auth" "listen" }}
{{- if hasKey $http $owned }}
{{- $problems = append $problems (printf "config.http.%s: the chart sets it (from %s); remove it from config.http" $owned (get (dict "publicUrl" "publicUrl" "auth" "auth" "listen" "listenAddress and containerPort") $owned)) }}
{{- end }}
{{- end }}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- $problems = append $problems (printf "autoscaling.minReplicas (%v) is above autoscaling.maxReplicas (%v)" .Values.autoscaling.minReplicas .Values.autoscaling.maxReplicas) }}
{{- end }}
{{- $drain := div (int (get $http "drainTimeoutMs" | default 10000)) 1000 }}
{{- if le (int .Values.terminationGracePeriodSeconds) (add (int .Values.preStopSleepSeconds) $drain) }}
{{- $problems = append $problems (printf "terminationGracePeriodSeconds (%v) must exceed preStopSleepSeconds (%v) + config.http.drainTimeoutMs (%vs): calls in flight would be killed before they drain" .Values.terminationGracePeriodSeconds .Values.preStopSleepSeconds $drain) }}
{{- end }}
{{- if and .Values.podDisruptionBudget.enabled (hasKey .Values.podDisruptionBudget "minAvailable") (hasKey .Values.podDisruptionBudget "maxUnavailable") }}
{{- $problems = append $problems "podDisruptionBudget: set minAvailable or maxUnavailable, not both (set the other to null)" }}
{{- end }}
{{- join "\n" $problems }}
{{- end }}

{{/* Stop rendering with every problem listed. Included by each gateway object. */}}
{{- define "anygpt-discovery.validate" -}}
{{- $problems := include "anygpt-discovery.problems" . }}
{{- if $problems }}
{{- fail (printf "\n\nanygpt-discovery: these values cannot be served:\n- %s\n" (replace "\n" "\n- " $problems)) }}
{{- end }}
{{- end }}

{{/* The Service's DNS names, for http.allowedHosts (no port: any port). */}}
{{- define "anygpt-discovery.clusterHosts" -}}
{{- $svc := include "anygpt-discovery.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.service.clusterDomain) | toJson }}
{{- end }}

{{/*
The gateway's config file: `config` with what the chart owns added. `${ANYGPT_STORE_URL}` and
`${ANYGPT_STORE_KEY}` are expanded by the gateway from the pod's environment (Secrets), so no
secret is ever in the ConfigMap.
*/}}
{{- define "anygpt-discovery.configJson" -}}
{{- $discovery := deepCopy (.Values.config | default dict) }}
{{- $http := deepCopy (get $discovery "http" | default dict) }}
{{- $_ := set $http "publicUrl" (include "anygpt-discovery.publicUrl" .) }}
{{- $_ := set $http "auth" (deepCopy .Values.auth) }}
{{- if .Values.service.allowClusterHosts }}
{{- $_ := set $http "allowedHosts" (concat (get $http "allowedHosts" | default list) (include "anygpt-discovery.clusterHosts" . | fromJsonArray) | uniq) }}
{{- end }}
{{- $_ := set $discovery "http" $http }}
{{- if .Values.store.enabled }}
{{- $store := dict "url" "${ANYGPT_STORE_URL}" "key" "${ANYGPT_STORE_KEY}" }}
{{- if .Values.store.prefix }}{{ $_ := set $store "prefix" .Values.store.prefix }}{{ end }}
{{- $_ := set $discovery "store" $store }}
{{- end }}
{{- dict "discovery" $discovery | toPrettyJson }}
{{- end }}
