import { z } from 'zod';

import { imageProblem, registryProblem } from '../catalog/image-ref.js';
import { engineFor } from '../engines/registry.js';

/**
 * The settings file, key by key. Later parts add their own sections here; every key is
 * also settable from the environment as LLMGW_ + its path in upper snake case.
 */

const listenPattern = /^(?:\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):(\d{1,5})$/;

const listenMessage = 'expected HOST:PORT, e.g. 127.0.0.1:8080, 0.0.0.0:8080 (every interface) or [::1]:8080';

export const listenSchema = z.string({ error: listenMessage }).refine((v) => {
  const m = listenPattern.exec(v);
  return m?.[1] !== undefined && Number(m[1]) <= 65535;
}, listenMessage);

export const databaseSchema = z
  .string({ error: 'expected sqlite:PATH or a PostgreSQL URL (postgres://user@host:5432/llmgw)' })
  .refine(
    (v) => /^sqlite:.+/.test(v) || /^postgres(?:ql)?:\/\/.+/.test(v),
    'expected sqlite:PATH (e.g. sqlite:/var/lib/llmgw/llmgw.db) or a PostgreSQL URL (postgres://user@host:5432/llmgw)',
  );

/** The build llmgw was tested against (the captures in shared/reference/llama-server are of it). */
export const defaultLlamaBuild = 'b10587';
/** Where the agent downloads llama.cpp's release builds from, unless release_url names a mirror. */
export const defaultReleaseUrl = 'https://github.com/ggml-org/llama.cpp/releases/download';

export const llamacppSettingsSchema = z.strictObject({
  /**
   * llama-server to run; setting it opts out of the agent's install (at `build`). Set on a node, it wins
   * over the control plane's; a build the agent installed and checked wins over both (agent/llama-bin.ts).
   */
  bin: z.string().min(1).optional(),
  /** Requests one server handles at once, when a profile does not say (llama.cpp's own default of one queues the rest). */
  parallel: z.int().min(1).max(512).default(4),
  /** CPU threads of a shard without a GPU; 0 takes half the node's CPUs. */
  threads: z.int().min(0).max(1024).default(0),
  /** The release the agents install, when no bin is set: a tag of ggml-org/llama.cpp. */
  build: z
    .string()
    .regex(/^b\d+$/, 'a llama.cpp release tag such as b10587')
    .default(defaultLlamaBuild),
  /** Where releases are downloaded from: `<release_url>/<build>/<asset>`. An offline site points it at its mirror. */
  release_url: z
    .url({
      protocol: /^https?$/,
      error: `an http(s) address, e.g. ${defaultReleaseUrl}`,
    })
    .default(defaultReleaseUrl),
  /** A CUDA build's .tar.gz for NVIDIA nodes (llama.cpp publishes none for Linux); without it they get the Vulkan build. */
  cuda_archive: z.url({ protocol: /^https?$/, error: 'an http(s) address of a .tar.gz' }).optional(),
  /** The SHA-256 the downloaded archive must have, where the release publishes none. */
  sha256: z
    .string()
    .regex(/^[0-9a-f]{64}$/, 'a SHA-256 digest: 64 hex digits')
    .optional(),
});

const imageSchema = z
  .string({ error: 'a container image, e.g. vllm/vllm-openai:v0.21.0' })
  .superRefine((v, ctx) => {
    const problem = imageProblem(v);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  });

/** Profiles with `runtime: container`: how this node's agent reaches its container daemon and runs engines there (docs/containers.md). */
export const containersSettingsSchema = z.strictObject({
  /** Which daemon: auto takes DOCKER_HOST's, else the first socket that answers (Docker's, then Podman's). */
  runtime: z
    .enum(['auto', 'docker', 'podman'], { error: 'auto, docker or podman (auto: the daemon that answers)' })
    .default('auto'),
  /** The daemon's address: unix:///PATH or tcp://HOST:PORT; unset, DOCKER_HOST, then the usual sockets. */
  host: z
    .string()
    .regex(
      /^(?:unix:\/\/\/.+|tcp:\/\/[A-Za-z0-9.:[\]-]+:\d{1,5})?$/,
      'unix:///PATH (e.g. unix:///var/run/docker.sock) or tcp://HOST:PORT; leave it empty for DOCKER_HOST or the usual sockets',
    )
    .default(''),
  /** How GPUs reach containers: auto is CDI on Podman, and on Docker the nvidia runtime unless the daemon reports CDI. */
  gpus: z
    .enum(['auto', 'nvidia', 'cdi'], {
      error: 'auto, nvidia (the NVIDIA Container Toolkit runtime) or cdi (CDI device names)',
    })
    .default('auto'),
  /** An image per engine instead of llmgw's default (a profile's `image:` wins over it). */
  images: z
    .strictObject({
      llamacpp: imageSchema.optional(),
      vllm: imageSchema.optional(),
      sglang: imageSchema.optional(),
      trtllm: imageSchema.optional(),
    })
    .prefault({}),
  /** A registry mirror (HOST[:PORT][/PREFIX]) that replaces the registry of the default images, for offline sites. */
  registry: z
    .string()
    .superRefine((v, ctx) => {
      const problem = v === '' ? undefined : registryProblem(v);
      if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
    })
    .default(''),
  /** When images are pulled: missing (when not on the node), always (before each start), never (refused when missing). */
  pull: z
    .enum(['missing', 'always', 'never'], {
      error: 'missing (pull an image the node lacks), always or never (load images by hand)',
    })
    .default('missing'),
  /** host: the node's IPC namespace (what vLLM and SGLang document); private: a /dev/shm of shm_size_gb. */
  ipc: z
    .enum(['host', 'private'], {
      error: "host (share the node's IPC namespace) or private (a /dev/shm of shm_size_gb)",
    })
    .default('host'),
  /** The size of a container's /dev/shm with ipc: private, in GB (PyTorch moves tensors between processes through it). */
  shm_size_gb: z
    .number({ error: 'a number of GB, e.g. 16' })
    .min(0.064, "at least 0.064 GB (64 MB, the daemon's default)")
    .max(4096, 'at most 4096 GB')
    .default(16),
  /** How long a container labelled for this node that no shard claims is left before it is removed. */
  orphan_grace_s: z
    .int({ error: 'a whole number of seconds, e.g. 300' })
    .min(0, 'at least 0 s (remove at once)')
    .max(86_400, 'at most 86400 s (a day)')
    .default(300),
});

const binSchema = (bin: string) => z.strictObject({ bin: z.string().min(1).default(bin) });

export const settingsSchema = z.strictObject({
  listen: listenSchema.default('127.0.0.1:8080'),
  database: databaseSchema.optional(),
  data_dir: z.string().min(1).default('./.llmgw'),
  agent: z
    .strictObject({
      /** How often agents report; a node silent for three of these is not ready. Set on the control plane. */
      heartbeat_ms: z.int().min(100).max(600_000).default(5000),
      /**
       * The address engines on this node listen on and the gateway reaches them at; unset,
       * the address the agent connects from (loopback when the control plane is on this machine).
       */
      address: z
        .string()
        .regex(/^[A-Za-z0-9.:-]+$/, 'an IP address or host name of this node, e.g. 10.0.0.12')
        .optional(),
      /**
       * The port of this node's engine proxy: TLS on agent.address (else every address), through
       * which gateways on other machines reach the node's engines, which then listen on loopback
       * only. 0: one the OS gives, reported to the control plane. Used once the control plane
       * gives the node a certificate (TLS on), and not when it is on this machine's loopback.
       */
      proxy_port: z.int().min(0).max(65535).default(0),
      /** How long an engine gets to finish after SIGTERM before SIGKILL. */
      stop_grace_s: z.int().min(0).max(3600).default(30),
      models: z
        .strictObject({
          /**
           * The most a node's model cache may hold, in GB (10^9 bytes); unset, only the disk bounds it.
           * Past it, files of models no longer in the catalog go first, least recently used first.
           */
          max_gb: z.number({ error: 'a number of GB, e.g. 500' }).min(1, 'at least 1 GB').optional(),
        })
        .prefault({}),
      engines: z
        .strictObject({
          llamacpp: llamacppSettingsSchema.prefault({}),
          // Each engine's usual executable (SGLang's: the Python it is installed for).
          vllm: binSchema(engineFor('vllm').defaultBin).prefault({}),
          sglang: binSchema(engineFor('sglang').defaultBin).prefault({}),
          trtllm: binSchema(engineFor('trtllm').defaultBin).prefault({}),
        })
        .prefault({}),
      containers: containersSettingsSchema.prefault({}),
    })
    .prefault({}),
  /** Several control planes on one PostgreSQL database: one leads (places replicas) at a time. */
  ha: z
    .strictObject({
      /**
       * How long the leader's lease lasts unrenewed: a leader that dies is replaced within
       * about this plus a third of it. Renewed every third of it.
       */
      lease_s: z.int().min(2).max(300).default(10),
    })
    .prefault({}),
  placement: z
    .strictObject({
      /** Ports engines listen on, FIRST-LAST. */
      ports: z
        .string()
        .regex(/^\d{1,5}-\d{1,5}$/, 'FIRST-LAST, e.g. 20000-29999')
        .refine((v) => {
          const [a, b] = v.split('-').map(Number);
          return a !== undefined && b !== undefined && a >= 1024 && b <= 65535 && a <= b;
        }, 'a range within 1024-65535, FIRST no more than LAST, e.g. 20000-29999')
        .default('20000-29999'),
      /** A node not ready for this long has its replicas placed elsewhere. */
      node_lost_after_s: z.int().min(5).max(86_400).default(60),
      /** CPU threads a CPU replica reserves; 0 takes half the node's CPUs. */
      cpu_threads: z.int().min(0).max(1024).default(0),
    })
    .prefault({}),
  gateway: z
    .strictObject({
      /** The largest request body /v1 takes (images inline make bodies big). */
      max_body_mb: z.number().min(0.01).max(1024).default(16),
      /** Other replicas a request is sent to after a refusal or a 5xx before its first byte. */
      retries: z.int().min(0).max(10).default(2),
      /**
       * How long an engine may send nothing on a request (before its answer's head, or between
       * bytes of it) before the client gets 504 (a stream: an error event) and the replica leaves
       * rotation until it answers a request again. A non-streamed answer comes whole at its
       * end, so this also bounds the longest non-streamed generation.
       */
      upstream_idle_timeout_s: z
        .number({ error: 'a number of seconds, e.g. 300' })
        .min(0.5, 'at least 0.5 s')
        .max(86_400, 'at most 86400 s (a day)')
        .default(300),
      /**
       * Connections one client address may hold open on the listen address (API, gateway and
       * agents alike); past it, a new one is answered 503 and closed. A reverse proxy in front
       * is one address: raise it to what the proxy opens.
       */
      max_connections_per_client: z
        .int({ error: 'a whole number of connections, e.g. 512' })
        .min(1, 'at least 1 connection, e.g. 512')
        .max(1_000_000, 'at most 1000000 connections')
        .default(512),
      /**
       * Processes serving the gateway's /v1 on the listen address, each on its own core
       * (docs/gateway-workers.md): "auto" is one per core; 0 serves it in the control plane's
       * (or `llmgw gateway`'s) own process.
       */
      workers: z
        .union([z.literal('auto'), z.int().min(0).max(256)], {
          error:
            'a number of worker processes (0 serves the gateway in the main process), or "auto" (one per core)',
        })
        .default('auto'),
      queue: z
        .strictObject({
          /** Requests that may wait for a free replica of one model; past it, 503 at once. */
          max_per_model: z.int().min(0).max(100_000).default(256),
          /** How long one waits before 503 with Retry-After. */
          timeout_s: z.number().min(0.1).max(3600).default(30),
        })
        .prefault({}),
      /**
       * Requests for a model scaled to zero (autoscale min 0) wait here while a replica starts,
       * instead of being refused.
       */
      waiting_room: z
        .strictObject({
          /** Requests that may wait for one model to start; past it, 503 at once. */
          max_per_model: z
            .int({ error: 'a whole number of requests, e.g. 1000' })
            .min(0, 'at least 0 (0: refuse at once while the model is at zero)')
            .max(100_000, 'at most 100000 requests')
            .default(1000),
          /** How long one waits before 503 (vLLM takes minutes to load a large model). */
          timeout_s: z
            .number({ error: 'a number of seconds, e.g. 300' })
            .min(1, 'at least 1 s')
            .max(3600, 'at most 3600 s (an hour)')
            .default(300),
        })
        .prefault({}),
    })
    .prefault({}),
  /** Models with `autoscale:` in the catalog: how the leading control plane decides their counts. */
  autoscale: z
    .strictObject({
      /** How often each autoscaled model is decided on. */
      interval_s: z
        .number({ error: 'a number of seconds, e.g. 5' })
        .min(0.1, 'at least 0.1 s')
        .max(3600, 'at most 3600 s')
        .default(5),
      /**
       * How long load must stay low before a model scales down: the highest count wanted over
       * this window is kept (Kubernetes HPA's stabilisation window, 300 s there too).
       */
      scale_down_window_s: z
        .number({ error: 'a number of seconds, e.g. 300' })
        .min(0, 'at least 0 s')
        .max(86_400, 'at most 86400 s (a day)')
        .default(300),
      /** The most replicas one decision adds (scaling up does not wait). */
      scale_up_step: z
        .int({ error: 'a whole number of replicas, e.g. 4' })
        .min(1, 'at least 1 replica')
        .max(10_000)
        .default(4),
      /** A gateway's load report counts for this long; a gateway silent longer is left out. */
      report_ttl_s: z
        .number({ error: 'a number of seconds, e.g. 5' })
        .min(0.5, 'at least 0.5 s')
        .max(600, 'at most 600 s')
        .default(5),
    })
    .prefault({}),
  hub: z
    .strictObject({
      /** The Hugging Face hub, or a mirror of it; unset, HF_ENDPOINT, else https://huggingface.co. */
      endpoint: z
        .url({ protocol: /^https?$/, error: 'an http(s) address, e.g. https://huggingface.co' })
        .optional(),
      /** A token of a hub account (HF_TOKEN when unset), for gated and private repositories; sent only to the hub. */
      token: z.string().min(1, 'a token such as hf_...; remove the key to use none').optional(),
    })
    .prefault({}),
  mirror: z
    .strictObject({
      /** Agents fetch model files through the control plane, which fetches each from the hub once. */
      enabled: z.boolean().default(true),
      /** Where the mirror keeps files (the Hugging Face cache layout); unset, DATA_DIR/mirror. */
      dir: z.string().min(1).optional(),
    })
    .prefault({}),
  tls: z
    .strictObject({
      /**
       * HTTPS on the listen address. Unset: on when it listens beyond loopback. false with a
       * non-loopback address is for an operator who terminates TLS in front (logged loudly).
       */
      enabled: z.boolean({ error: 'true or false' }).optional(),
      /** A PEM certificate (its chain after it) to serve instead of one from the cluster's own CA. */
      cert: z.string().min(1, 'a path to a PEM certificate file').optional(),
      /** Its private key (PEM). */
      key: z.string().min(1, 'a path to a PEM private key file').optional(),
      /** More names and addresses for the serving certificate: a load balancer's, a DNS alias. */
      san: z
        .array(
          z
            .string()
            .regex(/^[A-Za-z0-9.:*-]+$/, 'a host name or an IP address, e.g. llmgw.example.com or 10.0.0.5'),
        )
        .default([]),
    })
    .prefault({})
    .superRefine((t, ctx) => {
      if ((t.cert === undefined) === (t.key === undefined)) return;
      const [given, missing] = t.cert === undefined ? ['key', 'cert'] : ['cert', 'key'];
      ctx.addIssue({
        code: 'custom',
        path: [missing],
        message: `tls.${given} is set without tls.${missing}: give both tls.cert and tls.key (PEM files), or neither to use the cluster's own CA`,
      });
    }),
  /**
   * Kubernetes mode: present, the control plane places replicas as Deployments (LeaderWorkerSets
   * for multi-node profiles) in this namespace instead of through agents (docs/kubernetes.md).
   */
  kubernetes: z
    .strictObject({
      /** Where model objects are created. */
      namespace: z
        .string()
        .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'a namespace name: lower case letters, digits and -')
        .default('llmgw'),
      /** Unset: the in-cluster service account, else KUBECONFIG or ~/.kube/config. */
      kubeconfig: z.string().default(''),
      /** A context of the kubeconfig; unset, its current one. */
      context: z.string().default(''),
      models: z
        .strictObject({
          /** A PersistentVolumeClaim holding the models (the Hugging Face cache layout), mounted read-only. */
          pvc: z.string().default(''),
          mount_path: z.string().startsWith('/', 'an absolute path, e.g. /models').default('/models'),
          /** Without a PVC: the image of the init container that downloads the model into an emptyDir. */
          downloader_image: z.string().default(''),
        })
        .prefault({}),
      /** The RuntimeClass engines run with (e.g. nvidia); unset, the cluster's default. */
      runtime_class: z.string().default(''),
      /** The port engines listen on inside their pods. */
      engine_port: z.int().min(1).max(65535).default(8000),
      /** The ServiceAccount engine pods run as; unset, the namespace's default. */
      service_account: z.string().default(''),
      /**
       * A Secret llmgw keeps its admin key and engine keys' secret in, made at the first start and
       * read at every later one, for those LLMGW_ADMIN_KEY and LLMGW_ENGINE_KEY_SECRET do not give.
       * Unset (no name), they are made as off Kubernetes. The Helm chart sets it.
       */
      keys_secret: z
        .strictObject({
          name: z
            .string()
            .regex(
              /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)?$/,
              'a Secret name: lower case letters, digits, - and .',
            )
            .default(''),
          /** Unset: kubernetes.namespace. */
          namespace: z
            .string()
            .regex(
              /^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)?$/,
              'a namespace name: lower case letters, digits and -',
            )
            .default(''),
        })
        .prefault({}),
      /**
       * What each engine container requests of its node besides GPUs (Kubernetes quantities);
       * unset, what llmgw counts for its engine (docs/kubernetes.md, "CPU, memory and /dev/shm").
       * A memory set here is its limit too.
       */
      resources: z
        .strictObject({
          cpu: z
            .string()
            .regex(/^$|^([0-9]+(\.[0-9]+)?|[0-9]+m)$/, 'CPUs, e.g. cpu: "4" or cpu: 500m')
            .default(''),
          memory: z
            .string()
            .regex(/^$|^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$/, 'bytes, e.g. memory: 32Gi')
            .default(''),
        })
        .prefault({}),
    })
    .optional(),
  // Each model is validated by the catalog's own rules, which give better messages than a nested schema.
  models: z.array(z.unknown()).default([]),
});

export type RawSettings = z.output<typeof settingsSchema>;
export type LlamacppSettings = z.output<typeof llamacppSettingsSchema>;
export type AgentSettings = RawSettings['agent'];
export type ContainersSettings = RawSettings['agent']['containers'];
export type PlacementSettings = RawSettings['placement'];
export type GatewaySettings = RawSettings['gateway'];
export type HubSettings = RawSettings['hub'];
export type TlsSettings = RawSettings['tls'];
export type AutoscaleSettings = RawSettings['autoscale'];
export type KubernetesSettings = NonNullable<RawSettings['kubernetes']>;
