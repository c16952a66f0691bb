{{/*
Every template mirrors core/src/install/ (renderInstall): test/helm/helm-template.test.ts holds
`helm template` to `gatehouse install render` for the same values, object by object.
*/}}

{{/* The gateway version: image.tag, else the chart's appVersion. */}}
{{- define "gatehouse.tag" -}}
{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Labels of every object; the last three are Helm's own (install render has its own managed-by). */}}
{{- define "gatehouse.labels" -}}
app.kubernetes.io/name: gatehouse
app.kubernetes.io/version: {{ include "gatehouse.tag" . | toJson }}
app.kubernetes.io/managed-by: {{ .Release.Service | toJson }}
app.kubernetes.io/instance: {{ .Release.Name | toJson }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | toJson }}
{{- end }}

{{/* (dict "root" $ "component" "gateway") */}}
{{- define "gatehouse.componentLabels" -}}
{{ include "gatehouse.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Selectors: never Helm's labels, which change with the chart version. */}}
{{- define "gatehouse.selector" -}}
app.kubernetes.io/name: gatehouse
app.kubernetes.io/component: {{ . }}
{{- end }}

{{- define "gatehouse.image" -}}
{{ printf "%s/%s:%s" .Values.image.registry .Values.image.repository (include "gatehouse.tag" .) }}
{{- end }}

{{/* Hardened defaults for every container (workloads.ts CONTAINER_SECURITY). */}}
{{- define "gatehouse.containerSecurity" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "gatehouse.podSecurity" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
{{- end }}

{{- define "gatehouse.pullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . | toJson }}
{{- end }}
{{- end }}
{{- end }}

{{/* --config-dir, or --kube with one --namespace per watched namespace. */}}
{{- define "gatehouse.configArgs" -}}
{{- if eq .Values.config.source "kube" -}}
- "--kube"
{{- range .Values.config.kube.namespaces }}
- "--namespace"
- {{ . | toJson }}
{{- end }}
{{- else -}}
- "--config-dir"
- "/etc/gatehouse/config"
{{- end }}
{{- end }}

{{- define "gatehouse.configMounts" -}}
{{- if ne .Values.config.source "kube" }}
- name: config
  mountPath: /etc/gatehouse/config
  readOnly: true
{{- end }}
{{- end }}

{{/* Optional: the pods start (with no resources) before the ConfigMap is created. */}}
{{- define "gatehouse.configVolumes" -}}
{{- if ne .Values.config.source "kube" }}
- name: config
  configMap:
    name: {{ .Values.config.configMap.name | toJson }}
    optional: true
{{- end }}
{{- end }}

{{/* The kube source's Lease holder identity and namespace, from the downward API. */}}
{{- define "gatehouse.podEnv" -}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end }}

{{/*
What the kube source does (rbac.ts kubeSourceRules): read the custom kinds in our groups and in
Gloo Edge's, write their status (the gateway only), read Secrets, ConfigMaps, Services and
EndpointSlices. (dict "root" $ "writeStatus" true)
*/}}
{{- define "gatehouse.kubeSourceRules" -}}
{{- $d := .root.Values.apiGroupDomain }}
{{- $groups := list
  (dict "group" (printf "gatehouse.%s" $d) "resources" (list "upstreams" "upstreamgroups"))
  (dict "group" (printf "enterprise.%s" $d) "resources" (list "authconfigs"))
  (dict "group" (printf "graphql.%s" $d) "resources" (list "graphqlapis"))
  (dict "group" (printf "gateway.%s" $d) "resources" (list "routetables" "virtualservices" "gateways" "virtualhostoptions" "routeoptions"))
  (dict "group" (printf "ratelimit.%s" $d) "resources" (list "ratelimitconfigs"))
  (dict "group" "gloo.solo.io" "resources" (list "upstreams" "upstreamgroups"))
  (dict "group" "enterprise.gloo.solo.io" "resources" (list "authconfigs"))
  (dict "group" "graphql.gloo.solo.io" "resources" (list "graphqlapis"))
  (dict "group" "gateway.solo.io" "resources" (list "routetables" "virtualservices" "gateways" "virtualhostoptions" "routeoptions"))
  (dict "group" "ratelimit.solo.io" "resources" (list "ratelimitconfigs")) }}
{{- range $groups }}
- apiGroups: [{{ .group | toJson }}]
  resources: {{ .resources | toJson }}
  verbs: [get, list, watch]
{{- end }}
{{- if .writeStatus }}
{{- range $groups }}
- apiGroups: [{{ .group | toJson }}]
  resources: [{{ range $i, $r := .resources }}{{ if $i }}, {{ end }}{{ printf "%s/status" $r | toJson }}{{ end }}]
  verbs: [get, update, patch]
{{- end }}
{{- else }}
{{- /* extauth writes its build result into AuthConfigs' status.extauth. */}}
- apiGroups: [{{ printf "enterprise.%s" $d | toJson }}]
  resources: ["authconfigs/status"]
  verbs: [patch]
- apiGroups: ["enterprise.gloo.solo.io"]
  resources: ["authconfigs/status"]
  verbs: [patch]
{{- end }}
- apiGroups: [""]
  resources: [secrets, configmaps, services]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create]
{{- end }}

{{/* The ext_authz caller token (workloads.ts tokenArgs/tokenMounts/tokenVolumes). */}}
{{- define "gatehouse.tokenSecret" -}}
{{ .Values.extauth.callerToken.existingSecret | default "extauth-caller-token" }}
{{- end }}

{{- define "gatehouse.tokenArgs" -}}
{{- if .Values.extauth.callerToken.enabled }}
- "--extauth-token-file"
- "/etc/gatehouse/extauth-token/token"
{{- end }}
{{- end }}

{{- define "gatehouse.tokenMounts" -}}
{{- if .Values.extauth.callerToken.enabled }}
- name: caller-token
  mountPath: /etc/gatehouse/extauth-token
  readOnly: true
{{- end }}
{{- end }}

{{- define "gatehouse.tokenVolumes" -}}
{{- if .Values.extauth.callerToken.enabled }}
- name: caller-token
  secret:
    secretName: {{ include "gatehouse.tokenSecret" . | toJson }}
    defaultMode: 288  # 0440
    items:
      - { key: token, path: token }
{{- end }}
{{- end }}

{{/*
The pod knobs both Deployments take (workloads.ts podSpec, containerSecurity, lifecycle).
(dict "root" $ "v" .Values.gateway)
*/}}
{{- define "gatehouse.podSecurityMerged" -}}
{{- $sc := fromYaml (include "gatehouse.podSecurity" .root) }}
{{- /* set, not merge: merge would let a default true win over an explicit false. */}}
{{- range $k, $val := .v.podSecurityContext }}{{ $_ := set $sc $k $val }}{{ end }}
{{- toYaml $sc }}
{{- end }}

{{- define "gatehouse.containerSecurityMerged" -}}
{{- $sc := fromYaml (include "gatehouse.containerSecurity" .root) }}
{{- range $k, $val := .v.containerSecurityContext }}{{ $_ := set $sc $k $val }}{{ end }}
{{- toYaml $sc }}
{{- end }}

{{/* replicas (unless an HPA owns them) and the rollout strategy. */}}
{{- define "gatehouse.deploymentSpec" -}}
{{- if not .v.autoscaling.enabled }}
replicas: {{ int64 .v.replicas }}
{{- end }}
{{- with .v.updateStrategy }}
strategy:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Pod metadata: podLabels under ours (ours win), podAnnotations over the defaults given in "annotations". */}}
{{- define "gatehouse.podMetadata" -}}
{{- $labels := fromYaml .labels }}
{{- range $k, $val := .v.podLabels }}{{ if not (hasKey $labels $k) }}{{ $_ := set $labels $k $val }}{{ end }}{{ end }}
{{- $annotations := .annotations | default dict }}
{{- range $k, $val := .v.podAnnotations }}{{ $_ := set $annotations $k $val }}{{ end }}
labels:
  {{- toYaml $labels | nindent 2 }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "gatehouse.podSpec" -}}
securityContext:
  {{- include "gatehouse.podSecurityMerged" . | nindent 2 }}
terminationGracePeriodSeconds: {{ int64 .v.terminationGracePeriodSeconds }}
{{- with .v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .v.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .v.priorityClassName }}
priorityClassName: {{ . | toJson }}
{{- end }}
{{- end }}

{{/* preStop sleeps (the kubelet's sleep action) while the endpoint leaves the Services; then SIGTERM drains. */}}
{{- define "gatehouse.lifecycle" -}}
{{- if gt (int64 .v.preStopSleepSeconds) 0 }}
lifecycle:
  preStop:
    sleep:
      seconds: {{ int64 .v.preStopSleepSeconds }}
{{- end }}
{{- end }}

{{/* workloads.ts drainSeconds: the grace period less the preStop sleep and 5 s for the exit, at least 1. */}}
{{- define "gatehouse.drainSeconds" -}}
{{ max 1 (sub (sub (int64 .terminationGracePeriodSeconds) (int64 .preStopSleepSeconds)) 5) }}
{{- end }}

{{/* values.ts podValues: the PDB and HPA rules Kubernetes would refuse later. (dict "v" .Values.gateway "component" "gateway") */}}
{{- define "gatehouse.podChecks" -}}
{{- if and .v.pdb.create (hasKey .v.pdb "minAvailable") (hasKey .v.pdb "maxUnavailable") }}
{{- fail (printf "%s.pdb: set minAvailable or maxUnavailable, not both [GH_INSTALL_VALUES_INVALID]" .component) }}
{{- end }}
{{- if and .v.autoscaling.enabled (gt (int64 .v.autoscaling.minReplicas) (int64 .v.autoscaling.maxReplicas)) }}
{{- fail (printf "%s.autoscaling: minReplicas %d is more than maxReplicas %d [GH_INSTALL_VALUES_INVALID]" .component (int64 .v.autoscaling.minReplicas) (int64 .v.autoscaling.maxReplicas)) }}
{{- end }}
{{- end }}
