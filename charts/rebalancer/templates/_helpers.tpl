{{/*
Chart name, shortened to the 63 characters a label value may hold.
*/}}
{{- define "rebalancer.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Prefix of every resource name. A release already named after the chart is not repeated
("rebalancer", not "rebalancer-rebalancer").
*/}}
{{- define "rebalancer.fullname" -}}
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

{{- define "rebalancer.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels that never change over a release's life, so Deployment and Service selectors stay valid.
*/}}
{{- define "rebalancer.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rebalancer.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "rebalancer.labels" -}}
helm.sh/chart: {{ include "rebalancer.chart" . }}
{{ include "rebalancer.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: rebalancer
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "rebalancer.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "rebalancer.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
A digest pins the exact image, so it wins over the tag.
*/}}
{{- define "rebalancer.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- /* The join gate's and the sidecar's image (agentImage), the operator's where left empty. */ -}}
{{- define "rebalancer.agentImage" -}}
{{- $repository := default .Values.image.repository .Values.agentImage.repository }}
{{- if .Values.agentImage.digest }}
{{- printf "%s@%s" $repository .Values.agentImage.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default (default .Chart.AppVersion .Values.image.tag) .Values.agentImage.tag) }}
{{- end }}
{{- end }}

{{- define "rebalancer.reportTokenSecretName" -}}
{{- default (printf "%s-report-token" (include "rebalancer.fullname" .)) .Values.reportToken.existingSecret }}
{{- end }}

{{- define "rebalancer.historyClaimName" -}}
{{- default (printf "%s-history" (include "rebalancer.fullname" .)) .Values.history.persistence.existingClaim }}
{{- end }}

{{/*
What the operator does with ConsumerGroups and the objects they reference: one grant per API
call it makes, nothing more (tests/deploy/chart/test_rbac.py names the code behind each, and
tests/lab/controlplane/test_rbac_rules.py runs the operator without each). Used in the
ClusterRole when every namespace is watched, else in a Role per watched namespace.
*/}}
{{- define "rebalancer.groupRules" -}}
# kopf lists and watches ConsumerGroups, and patches them to keep its progress annotations and
# the finalizer that stops the observer before deletion.
- apiGroups: ["rebalancer.dev"]
  resources: ["consumergroups"]
  verbs: ["list", "watch", "patch"]
# Status is written with JSON patches by the operator and merge patches by kopf (never read
# through the subresource: the watch brings it).
- apiGroups: ["rebalancer.dev"]
  resources: ["consumergroups/status"]
  verbs: ["patch"]
# TLS and SASL material referenced by spec.kafka, read by name.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
# The workload named by spec.workload: read to report a missing one and to plan rollouts;
# watched so that a new template or replica count starts its rollout at once; patched for
# the StatefulSet partition, Deployment pause and scale steps, and the gate.
- apiGroups: ["apps"]
  resources: ["statefulsets", "deployments"]
  verbs: ["get", "list", "watch", "patch"]
# A Deployment's ReplicaSets tell old pods from new ones during a rollout.
- apiGroups: ["apps"]
  resources: ["replicasets"]
  verbs: ["list"]
# The workload's pods: listed for rollouts and for the sidecars that receive enforcement
# requests; patched to open their join gates; deleted, uid-guarded, to replace a batch.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "patch", "delete"]
# Autoscalers of a workload whose rollouts are managed, found by their spec.scaleTargetRef
# (their names are the user's, hence list): KEDA ScaledObjects, patched only to pause KEDA
# during a rollout and resume it after (an annotation and the operator's mark beside it), and
# HorizontalPodAutoscalers, only read. Without KEDA installed the ScaledObject list is a 404,
# which the operator takes as none.
- apiGroups: ["keda.sh"]
  resources: ["scaledobjects"]
  verbs: ["list", "patch"]
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["list"]
# The <name>-consumer-settings ConfigMap that carries spec.policy.settings to the pods.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "create", "update"]
# Rebalance, warning and recovery Events on ConsumerGroups, posted by kopf.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end }}

{{/*
gate.serviceAccounts grouped by namespace, as JSON: {"ns": ["sa", ...]}; one Role per namespace.
*/}}
{{- define "rebalancer.gateAccounts" -}}
{{- $byNamespace := dict }}
{{- range .Values.gate.serviceAccounts }}
{{- $names := get $byNamespace .namespace | default list }}
{{- $_ := set $byNamespace .namespace (append $names .name | uniq) }}
{{- end }}
{{- toJson $byNamespace }}
{{- end }}
