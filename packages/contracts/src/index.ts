/**
 * Bridle's shared contracts: zod schemas only. No Node built-ins and no logger, so that
 * Temporal workflow code can import this package.
 */
export * from "./errors.ts";
export * from "./probe.ts";
export * from "./serving.ts";
export * from "./task-queues.ts";
export * from "./training.ts";
