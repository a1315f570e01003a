/**
 * The guard's rule engine, free of HTTP: the proxy and `bridle guard check` use exactly this.
 */
export { auditLine, auditLines } from "./audit.ts";
export type { Effect } from "./effect.ts";
export { shellEffects } from "./effects.ts";
export { checkToolCall, type ToolCallInput, type Verdict } from "./engine.ts";
export { parseShell, type SimpleCommand } from "./shell.ts";
export { toolCallEffects } from "./tool-call.ts";
