/**
 * Temporal task-queue names, in one place. GPU work runs on its own queues so that a dead GPU
 * node means a retried activity on another worker, not a lost run.
 */
export const TaskQueues = {
  /** Orchestration: workflows and cheap activities. */
  control: "bridle-control",
  /** Harness rollouts (CPU, sandboxed). */
  rollout: "bridle-rollout",
  /** Trainer steps (GPU when present). */
  training: "bridle-training",
  /** Adapter loads and canaries against the model server (GPU node). */
  serving: "bridle-serving",
} as const;
export type TaskQueue = (typeof TaskQueues)[keyof typeof TaskQueues];

/** Bridle's Temporal namespace. */
export const TemporalNamespace = "bridle";

/**
 * The search attributes Bridle registers, as typed keys: each is a Temporal `SearchAttributeKey`
 * (`{ name, type }`), so workflows and the gateway use them as they are.
 */
export const SearchAttributes = {
  run: { name: "BridleRun", type: "KEYWORD" },
  kind: { name: "BridleKind", type: "KEYWORD" },
  harness: { name: "BridleHarness", type: "KEYWORD" },
  model: { name: "BridleModel", type: "KEYWORD" },
  step: { name: "BridleStep", type: "INT" },
  evalScore: { name: "BridleEvalScore", type: "DOUBLE" },
} as const;

/** A training run's workflow id. */
export const runWorkflowId = (name: string) => `run-${name}`;
