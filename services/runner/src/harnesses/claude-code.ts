import { join } from "node:path";
import { type HarnessAdapter, jsonLines, lastLines } from "./types.ts";

interface ContentBlock {
  type?: string;
  name?: string;
}

/**
 * Claude Code (`@anthropic-ai/claude-code`): speaks Anthropic Messages to `ANTHROPIC_BASE_URL` (the
 * guard translates to the OpenAI-compatible model server). `-p --output-format stream-json
 * --verbose` prints one event per content block and a final `result`. Retries are cut to one and
 * non-essential traffic is off, so an offline sandbox fails fast instead of stalling.
 */
export const claudeCode: HarnessAdapter = {
  name: "claude-code",
  api: "anthropic",
  version: "2.1.197",
  launch(ctx) {
    return {
      command: join(ctx.install.npmRoot, ".bin", "claude"),
      args: [
        "-p",
        ctx.instruction,
        "--output-format",
        "stream-json",
        "--verbose",
        "--dangerously-skip-permissions",
        "--max-turns",
        String(ctx.maxTurns),
        "--no-session-persistence",
        "--model",
        ctx.model,
      ],
      env: {
        HOME: ctx.home,
        ANTHROPIC_BASE_URL: ctx.guardUrl,
        ANTHROPIC_API_KEY: ctx.apiKey,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS: "1",
        CLAUDE_CODE_DISABLE_THINKING: "1",
        CLAUDE_CODE_MAX_RETRIES: "1",
        API_TIMEOUT_MS: "600000",
        DISABLE_AUTOUPDATER: "1",
        IS_SANDBOX: "1",
      },
      files: [],
    };
  },
  report(run) {
    const events = jsonLines(run.stdout);
    const toolCalls = events
      .filter((e) => e.type === "assistant")
      .flatMap((e) =>
        ((e.message as { content?: ContentBlock[] })?.content ?? []).filter((b) => b.type === "tool_use"),
      )
      .map((b) => b.name ?? "unknown");
    const result = events.filter((e) => e.type === "result").at(-1) as
      | { result?: string; is_error?: boolean; subtype?: string; terminal_reason?: string }
      | undefined;
    const stopReason =
      result?.terminal_reason ?? result?.subtype ?? (events.length === 0 ? "no_output" : "unknown");
    let error: string | null = null;
    if (!result) error = `claude printed no result (exit ${run.exitCode}): ${lastLines(run.stderr)}`;
    else if (result.is_error)
      error = `claude reported an error (${stopReason}): ${(result.result ?? "").slice(0, 300)}`;
    return { toolCalls, finalAnswer: result?.result ?? null, stopReason, error };
  },
};
