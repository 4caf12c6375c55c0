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
{{- toYaml $policy -}}
{{- end -}}
