{{/* Names and labels. */}}
{{- define "llama-triton.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "llama-triton.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "llama-triton.selectorLabels" -}}
app.kubernetes.io/name: {{ include "llama-triton.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "llama-triton.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "llama-triton.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "llama-triton.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "llama-triton.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "llama-triton.claimName" -}}
{{- default (printf "%s-models" (include "llama-triton.fullname" .)) .Values.storage.existingClaim }}
{{- end }}

{{- define "llama-triton.adminSecretName" -}}
{{- default (printf "%s-admin" (include "llama-triton.fullname" .)) .Values.triton.restrictedApi.existingSecret }}
{{- end }}

{{/* GPUs per pod: one MPI rank per GPU, tensor x pipeline parallel. */}}
{{- define "llama-triton.worldSize" -}}
{{- mul (int .Values.engine.tensorParallelSize) (int .Values.engine.pipelineParallelSize) }}
{{- end }}

{{- define "llama-triton.repositoryPath" -}}
{{- printf "%s/%s" .Values.storage.mountPath .Values.storage.repositoryDir }}
{{- end }}

{{/* Flags every rank shares: where the models are, the ports, the restricted admin APIs.
     $(TRITON_ADMIN_KEY) is expanded by the kubelet from the Secret-backed env variable, so
     the key never appears in the manifest. */}}
{{- define "llama-triton.commonArgs" -}}
- --model-repository={{ include "llama-triton.repositoryPath" . }}
- --http-port={{ .Values.triton.ports.http }}
- --grpc-port={{ .Values.triton.ports.grpc }}
- --metrics-port={{ .Values.triton.ports.metrics }}
- --disable-auto-complete-config
{{- with .Values.triton.restrictedApi }}
{{- if .enabled }}
- --http-restricted-api={{ join "," .http }}:{{ .header }}=$(TRITON_ADMIN_KEY)
- --grpc-restricted-protocol={{ join "," .grpc }}:{{ .header }}=$(TRITON_ADMIN_KEY)
{{- end }}
{{- end }}
{{- end }}

{{/* Rank 0: serves every model, owns the endpoints and metrics. */}}
{{- define "llama-triton.serverArgs" -}}
{{ include "llama-triton.commonArgs" . }}
- --model-control-mode=none
- --strict-readiness=true
- --exit-on-error=true
- --exit-timeout-secs={{ .Values.triton.exitTimeoutSeconds }}
- --allow-metrics=true
- --allow-gpu-metrics=true
- --allow-cpu-metrics=true
- --log-verbose={{ .Values.triton.logVerbose }}
{{- range .Values.triton.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* World size > 1 without a launcher: mpirun, one rank per GPU.  Ranks > 0 load only the
     engine model, whose backend keeps them inside model load (they never open endpoints);
     each rank's Python stubs get their own shared-memory prefix. */}}
{{- define "llama-triton.mpirunArgs" -}}
{{- $world := int (include "llama-triton.worldSize" .) }}
{{- range $rank := until $world }}
{{- if gt $rank 0 }}
- ":"
{{- end }}
- "-n"
- "1"
- tritonserver
{{- if eq $rank 0 }}
{{ include "llama-triton.serverArgs" $ }}
{{- else }}
{{ include "llama-triton.commonArgs" $ }}
- --model-control-mode=explicit
- --load-model={{ $.Values.models.engine }}
{{- end }}
- --backend-config=python,shm-region-prefix-name=prefix{{ $rank }}_
{{- end }}
{{- end }}

{{- define "llama-triton.command" -}}
{{- if .Values.triton.command }}
{{- toYaml .Values.triton.command }}
{{- else if gt (int (include "llama-triton.worldSize" .)) 1 }}
- mpirun
{{- else }}
- tritonserver
{{- end }}
{{- end }}

{{- define "llama-triton.args" -}}
{{- if and (not .Values.triton.command) (gt (int (include "llama-triton.worldSize" .)) 1) }}
{{- include "llama-triton.mpirunArgs" . }}
{{- else }}
{{- include "llama-triton.serverArgs" . }}
{{- end }}
{{- end }}

{{/* The canary probe's command (serving/canary.py), as a JSON list; "args": extra flags. */}}
{{- define "llama-triton.canaryCommand" -}}
{{- $v := .root.Values -}}
{{- $cmd := list "python3" "-m" "serving" "canary" (printf "--grpc-url=127.0.0.1:%v" $v.triton.ports.grpc) (printf "--deadline=%v" $v.canary.deadlineSeconds) (printf "--deadline-unprioritized=%v" $v.canary.unprioritizedDeadlineSeconds) -}}
{{- concat $cmd .args | toJson -}}
{{- end }}

{{/* Value combinations the schema cannot express. */}}
{{- define "llama-triton.validate" -}}
{{- if .Values.canary.enabled }}
{{- $deadline := max (int .Values.canary.deadlineSeconds) (int .Values.canary.unprioritizedDeadlineSeconds) }}
{{- range $name, $probe := dict "probes.readiness" .Values.probes.readiness "probes.liveness" .Values.probes.liveness "openai.probes.readiness" .Values.openai.probes.readiness }}
{{- if le (int $probe.timeoutSeconds) $deadline }}
{{- fail (printf "%s.timeoutSeconds (%v) must exceed the canary's deadline (%v s): the kubelet would kill the canary before it can say whether the server answers" $name $probe.timeoutSeconds $deadline) }}
{{- end }}
{{- end }}
{{- end }}
{{- if has "health" .Values.triton.restrictedApi.http }}
{{- fail "triton.restrictedApi.http must not restrict 'health': the kubelet's probes call /v2/health/* without a key" }}
{{- end }}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- fail "autoscaling.minReplicas must be <= autoscaling.maxReplicas" }}
{{- end }}
{{- if and .Values.autoscaling.keda.enabled (not .Values.autoscaling.enabled) }}
{{- fail "autoscaling.keda.enabled needs autoscaling.enabled: without it the Deployment keeps a fixed replicaCount that every helm upgrade resets under KEDA's HPA" }}
{{- end }}
{{- end }}

{{/* The OpenAI front's API-key Secret. */}}
{{- define "llama-triton.openaiSecretName" -}}
{{- default (printf "%s-openai" (include "llama-triton.fullname" .)) .Values.openai.apiKey.existingSecret }}
{{- end }}

{{/* The endpoint picker's pods: a name of their own, so the server's selectors (Deployment,
Services, InferencePool) never match them. */}}
{{- define "llama-triton.eppSelectorLabels" -}}
app.kubernetes.io/name: {{ include "llama-triton.name" . }}-epp
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: endpoint-picker
{{- end }}

{{/* OpenTelemetry settings (docs/tracing.md) as the environment every container reads. */}}
{{- define "llama-triton.tracingEnv" -}}
{{- if .Values.tracing.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .Values.tracing.endpoint | quote }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ .Values.tracing.sampleRatio | quote }}
{{- if .Values.tracing.recordPrompts }}
- name: KIT_TRACE_PROMPTS
  value: "1"
{{- end }}
{{- end }}
{{- end }}

{{/* The OpenAI front container beside Triton: on, unless Dynamo's frontend serves the API. */}}
{{- define "llama-triton.openaiFront" -}}
{{- if and .Values.openai.enabled (not .Values.dynamo.enabled) }}true{{ end }}
{{- end }}

{{/* --- Many replicas behind Dynamo (values.yaml `dynamo`) ------------------------------------ */}}
{{- define "llama-triton.frontendName" -}}
{{- printf "%s-frontend" (include "llama-triton.fullname" .) }}
{{- end }}

{{/* Dynamo's frontend pods: a name of their own, so the server's selectors never match them. */}}
{{- define "llama-triton.frontendSelectorLabels" -}}
app.kubernetes.io/name: {{ include "llama-triton.name" . }}-frontend
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: dynamo-frontend
{{- end }}

{{/* What Dynamo 1.6.1's kubernetes discovery selects EndpointSlices (and, in container mode, Pods)
     by: both labels, compiled into its runtime (discovery/kube/daemon.rs); the operator puts them
     on each component's pods and Service (ai-dynamo/dynamo docs/kubernetes/service-discovery.md). */}}
{{- define "llama-triton.dynamoDiscoveryLabels" -}}
nvidia.com/dynamo-discovery-backend: kubernetes
nvidia.com/dynamo-discovery-enabled: "true"
nvidia.com/dynamo-namespace: kit
{{- end }}

{{/* The environment of every Dynamo process (cluster/topology.py dynamo_environment, for a pod):
     kubernetes discovery with the pod's identity from the downward API (the variables the operator
     injects: service-discovery.md "Environment Variables"), TCP requests, ZMQ events, and every
     address Dynamo binds and advertises on the pod's IP (the response-stream host may not be
     0.0.0.0); $HOME and the caches on the /tmp emptyDir (Dynamo keeps model-card files under
     $HOME/.cache/dynamo), nothing from a model hub. */}}
{{- define "llama-triton.dynamoEnv" -}}
- name: DYN_DISCOVERY_BACKEND
  value: kubernetes
- name: DYN_REQUEST_PLANE
  value: tcp
- name: DYN_EVENT_PLANE
  value: zmq
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_UID
  valueFrom:
    fieldRef:
      fieldPath: metadata.uid
{{- range list "DYN_TCP_RPC_HOST" "DYN_TCP_RESPONSE_STREAM_HOST" "DYN_EVENT_PLANE_HOST" "DYN_SYSTEM_HOST" }}
- name: {{ . }}
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- end }}
- name: HOME
  value: /tmp
- name: XDG_CACHE_HOME
  value: /tmp/.cache
- name: HF_HUB_OFFLINE
  value: "1"
{{- end }}

{{/* The worker's arguments: cluster/topology.py ClusterSpec.worker with the replica on the pod's
     loopback (tests/unit/test_deploy_dynamo.py compares the two), and the startup window. */}}
{{- define "llama-triton.workerArgs" -}}
- --replica
- 127.0.0.1:{{ .Values.triton.ports.grpc }}
- --repository
- {{ include "llama-triton.repositoryPath" . }}
- --model-name
- {{ .Values.openai.modelName | quote }}
- --endpoint
- kit.triton.generate
- --ready-timeout
- {{ .Values.dynamo.worker.readyTimeoutSeconds | quote }}
{{- end }}

{{/* The frontend's arguments: cluster/topology.py ClusterSpec.frontend with kubernetes discovery
     and every interface of the pod. */}}
{{- define "llama-triton.frontendArgs" -}}
{{- $d := .Values.dynamo -}}
- --http-host
- 0.0.0.0
- --http-port
- {{ $d.frontend.port | quote }}
- --namespace
- kit
- --router-mode
- {{ $d.routerMode }}
- --discovery-backend
- kubernetes
- --request-plane
- tcp
- --event-plane
- zmq
- --migration-limit
- {{ $d.migrationLimit | quote }}
{{- if and (eq $d.routerMode "kv") (not $d.kvEvents) }}
- --no-router-kv-events
{{- end }}
{{- end }}

{{/* Dynamo mode: what the schema cannot express. */}}
{{- define "llama-triton.validateDynamo" -}}
{{- with .Values.dynamo }}
{{- if .enabled }}
{{- if .kvEvents }}
{{- fail "dynamo.kvEvents: no engine of this kit publishes KV-cache events (the kit's worker relays none), so the router runs in its approximate mode (--no-router-kv-events), as cluster/topology.py does" }}
{{- end }}
{{- if $.Values.inferenceGateway.enabled }}
{{- fail "inferenceGateway.enabled and dynamo.enabled: the InferencePool routes to the OpenAI front container, which Dynamo's frontend replaces; route to the frontend's Service instead" }}
{{- end }}
{{- if ne $.Values.service.type "ClusterIP" }}
{{- fail "service.type must stay ClusterIP with dynamo.enabled: Triton's HTTP/gRPC APIs have no authentication and only the workers use them (the API is dynamo.frontend.service)" }}
{{- end }}
{{- $triton := list (int $.Values.triton.ports.http) (int $.Values.triton.ports.grpc) (int $.Values.triton.ports.metrics) }}
{{- range $name, $port := dict "dynamo.worker.requestPlanePort" .worker.requestPlanePort "dynamo.worker.systemPort" .worker.systemPort }}
{{- if has (int $port) $triton }}
{{- fail (printf "%s (%v) is one of Triton's ports in the same pod" $name $port) }}
{{- end }}
{{- end }}
{{- if eq (int .worker.requestPlanePort) (int .worker.systemPort) }}
{{- fail "dynamo.worker.requestPlanePort and dynamo.worker.systemPort must differ" }}
{{- end }}
{{- if eq (int .frontend.port) (int .frontend.responseStreamPort) }}
{{- fail "dynamo.frontend.port and dynamo.frontend.responseStreamPort must differ" }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
