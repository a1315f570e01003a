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

/** Bridle's Temporal namespace and the typed search attributes it registers. */
export const TemporalNamespace = "bridle";
export const SearchAttributes = {
  run: { name: "BridleRun", type: "Keyword" },
  kind: { name: "BridleKind", type: "Keyword" },
  harness: { name: "BridleHarness", type: "Keyword" },
  model: { name: "BridleModel", type: "Keyword" },
  step: { name: "BridleStep", type: "Int" },
  evalScore: { name: "BridleEvalScore", type: "Double" },
} as const;
