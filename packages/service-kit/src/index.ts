/** What every Bridle service shares: app factory, errors, validation, config, logging, HTTP client. */
export * from "./app.ts";
export * from "./artifacts.ts";
export * from "./attempt.ts";
export * from "./auth.ts";
export * from "./client.ts";
export * from "./env.ts";
export * from "./errors.ts";
export * from "./hash.ts";
export * from "./limit.ts";
export * from "./logger.ts";
export * from "./openapi.ts";
export * from "./paths.ts";
export * from "./restart.ts";
export * from "./s3.ts";
export * from "./serve.ts";
export * from "./stack-mark.ts";
export * from "./temporal.ts";
