{{/* The release's full name: the release name when it already holds the chart name, else release-chart. */}}
{{- define "gpu-reactor.fullname" -}}
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

{{- define "gpu-reactor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "gpu-reactor.labels" -}}
app.kubernetes.io/name: {{ include "gpu-reactor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The server pods' selector: stable across upgrades (a Deployment's selector is immutable). */}}
{{- define "gpu-reactor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpu-reactor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end -}}

{{- define "gpu-reactor.serviceAccountName" -}}
{{- default (include "gpu-reactor.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "gpu-reactor.tokenSecretName" -}}
{{- default (printf "%s-webhook-token" (include "gpu-reactor.fullname" .)) .Values.webhookToken.existingSecret -}}
{{- end -}}

{{- define "gpu-reactor.stateKeySecretName" -}}
{{- default (printf "%s-state-key" (include "gpu-reactor.fullname" .)) .Values.stateKey.existingSecret -}}
{{- end -}}

{{- define "gpu-reactor.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The policy file: the values' policy, with the token file where the chart mounts the Secret, and the
release's own namespace always denied (the reactor never acts on itself). */}}
{{- define "gpu-reactor.policy" -}}
{{- include "gpu-reactor.checkPolicy" . -}}
{{- if has .Release.Namespace .Values.policy.namespaces.allow -}}
{{- fail (printf "policy.namespaces.allow must not list the reactor's own namespace %q" .Release.Namespace) -}}
{{- end -}}
{{- $policy := deepCopy .Values.policy -}}
{{- $namespaces := deepCopy $policy.namespaces -}}
{{- $_ := set $namespaces "deny" (append ($namespaces.deny | default list) .Release.Namespace | uniq) -}}
{{- $_ := set $policy "namespaces" $namespaces -}}
{{- $server := merge (dict "tokenFile" "/etc/gpu-reactor/token/token" "listen" (printf "0.0.0.0:%d" (int .Values.ports.http)) "probeListen" (printf "0.0.0.0:%d" (int .Values.ports.metrics))) (omit ($policy.server | default dict) "listen" "probeListen" "tokenFile") -}}
{{- $_ := set $policy "server" $server -}}
{{- $lease := dict "leaseNamespace" .Release.Namespace "leaseName" (printf "%s-verifier" (include "gpu-reactor.fullname" .)) -}}
{{- $_ := set $policy "verify" (merge $lease (omit ($policy.verify | default dict) "leaseNamespace" "leaseName")) -}}
{{- $ledger := dict "ledgerName" (printf "%s-state" (include "gpu-reactor.fullname" .)) -}}
{{- $_ := set $policy "state" (merge $ledger (omit ($policy.state | default dict) "ledgerName")) -}}
{{- $source := dict -}}
{{- if .Values.rebalanceSource.tokenSecret -}}
{{- $_ := set $source "alertmanagerTokenFile" "/etc/gpu-reactor/alertmanager-token/token" -}}
{{- end -}}
{{- if .Values.rebalanceSource.caConfigMap -}}
{{- $_ := set $source "alertmanagerCaFile" "/etc/gpu-reactor/alertmanager-ca/ca.crt" -}}
{{- end -}}
{{- if $source -}}
{{- $_ := set $policy "rebalance" (merge $source (omit ($policy.rebalance | default dict) "alertmanagerTokenFile" "alertmanagerCaFile")) -}}
{{- end -}}
{{- $confirm := dict -}}
{{- if .Values.confirmSource.tokenSecret -}}
{{- $_ := set $confirm "tokenFile" "/etc/gpu-reactor/prometheus-token/token" -}}
{{- end -}}
{{- if .Values.confirmSource.caConfigMap -}}
{{- $_ := set $confirm "caFile" "/etc/gpu-reactor/prometheus-ca/ca.crt" -}}
{{- end -}}
{{- if $confirm -}}
{{- $_ := set $policy "confirm" (merge $confirm (omit ($policy.confirm | default dict) "tokenFile" "caFile")) -}}
{{- end -}}
{{- toYaml $policy -}}
{{- end -}}

{{/* A duration of the policy (a string like 1h30m, already matched by values.schema.json, or seconds) in
milliseconds, as reactor/config/fields.py parse_duration reads it. */}}
{{- define "gpu-reactor.ms" -}}
{{- if not (kindIs "string" .) -}}
{{- mul (int64 .) 1000 -}}
{{- else -}}
{{- $factor := dict "y" 31536000000 "w" 604800000 "d" 86400000 "h" 3600000 "m" 60000 "s" 1000 "ms" 1 -}}
{{- $rest := . -}}
{{- $ms := 0 -}}
{{- range list "y" "w" "d" "h" "m" "s" "ms" -}}
{{- $part := regexFind (printf "^[0-9]+%s" .) $rest -}}
{{- if and $part (not (and (eq . "m") (regexMatch "^[0-9]+ms" $rest))) -}}
{{- $ms = add $ms (mul (atoi (trimSuffix . $part)) (index $factor .)) -}}
{{- $rest = trimPrefix $part $rest -}}
{{- end -}}
{{- end -}}
{{- $ms -}}
{{- end -}}
{{- end -}}

{{/* The policy's cross-field rules that a JSON schema cannot say (reactor/config/settings.py _inconsistencies),
checked at render time so that `helm install` stops, naming the keys, instead of the pods (`reactor serve` exits 2).
A key set to null is the reactor's default, which the reactor checks. */}}
{{- define "gpu-reactor.checkPolicy" -}}
{{- $p := .Values.policy -}}
{{- range $pair := list (list "gpus" "min" "max") (list "replicas" "min" "max") -}}
{{- $lo := dig (index $pair 0) "min" nil $p -}}
{{- $hi := dig (index $pair 0) "max" nil $p -}}
{{- if and (not (kindIs "invalid" $lo)) (not (kindIs "invalid" $hi)) -}}
{{- if gt (float64 $lo) (float64 $hi) -}}
{{- fail (printf "policy.%s.min (%v) must not exceed policy.%s.max (%v)" (index $pair 0) $lo (index $pair 0) $hi) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and (not (kindIs "invalid" $p.cooldown)) (not (kindIs "invalid" $p.reverseAfter)) -}}
{{- if lt (atoi (include "gpu-reactor.ms" $p.reverseAfter)) (atoi (include "gpu-reactor.ms" $p.cooldown)) -}}
{{- fail (printf "policy.reverseAfter (%v) must be at least policy.cooldown (%v)" $p.reverseAfter $p.cooldown) -}}
{{- end -}}
{{- end -}}
{{- $server := $p.server | default dict -}}
{{- $deadline := default "8s" $server.notificationDeadline -}}
{{- $timeout := default "25s" $server.timeout -}}
{{- if ge (atoi (include "gpu-reactor.ms" $deadline)) (atoi (include "gpu-reactor.ms" $timeout)) -}}
{{- fail (printf "policy.server.notificationDeadline (%v) must be below policy.server.timeout (%v)" $deadline $timeout) -}}
{{- end -}}
{{- if ne (empty $server.tlsCert) (empty $server.tlsKey) -}}
{{- fail "policy.server.tlsCert and policy.server.tlsKey must be set together" -}}
{{- end -}}
{{- if eq (int .Values.ports.http) (int .Values.ports.metrics) -}}
{{- fail (printf "ports.http and ports.metrics must differ (both %v): the webhook and the probes listen apart" .Values.ports.http) -}}
{{- end -}}
{{- end -}}

{{/* Pods of the monitoring stack by their app.kubernetes.io/name, in one namespace: a NetworkPolicy peer
(Alertmanager calling the webhook, Prometheus scraping, the rebalancer asking Alertmanager's API, the confirm step
asking Prometheus's). */}}
{{- define "gpu-reactor.monitoringPeer" -}}
- namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {{ .namespace }}
  podSelector:
    matchExpressions:
      - key: app.kubernetes.io/name
        operator: In
        values: {{ toJson .names }}
{{- end -}}
