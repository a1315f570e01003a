/**
 * Bridle's shared contracts: zod schemas only. No Node built-ins and no logger, so that
 * Temporal workflow code can import this package.
 */
export * from "./artifacts.ts";
export * from "./errors.ts";
export * from "./evaluation.ts";
export * from "./guard.ts";
export * from "./probe.ts";
export * from "./reward.ts";
export * from "./rollout.ts";
export * from "./runs.ts";
export * from "./serving.ts";
export * from "./task-queues.ts";
export * from "./tasks.ts";
export * from "./training.ts";
export * from "./verifier.ts";
