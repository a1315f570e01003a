/**
 * Test doubles for what cannot run in tests, and helpers to run real processes.
 * The scripted upstream is a TEST DOUBLE for the model server: never use it on a product path.
 */
export * from "./harness-moves.ts";
export * from "./process.ts";
export * from "./recorded.ts";
export * from "./responses.ts";
export * from "./script.ts";
export * from "./tokens.ts";
export * from "./upstream.ts";
export * from "./upstream-process.ts";
