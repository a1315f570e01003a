import { join } from "node:path";
import type { McpServer } from "@bridle/contracts";
import { type HarnessAdapter, jsonLines, lastLines } from "./types.ts";

interface ContentBlock {
  type?: string;
  name?: string;
}

/** Where the task's MCP servers are written for Claude Code, relative to its home. */
const MCP_CONFIG = ".bridle/mcp.json";

/** Claude Code's `mcpServers` entries: `http` is streamable HTTP. */
function mcpServersConfig(servers: McpServer[]): Record<string, unknown> {
  return Object.fromEntries(
    servers.map((server) => [
      server.name,
      server.transport === "stdio"
        ? { type: "stdio", command: server.command, args: server.args }
        : { type: server.transport === "sse" ? "sse" : "http", url: server.url },
    ]),
  );
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
  mcp: true,
  version: "2.1.197",
  launch(ctx) {
    // The task's MCP servers, and no others (`--strict-mcp-config`): its tools are `mcp__<server>__<tool>`.
    const mcp =
      ctx.mcpServers.length > 0
        ? {
            args: ["--mcp-config", join(ctx.home, MCP_CONFIG), "--strict-mcp-config"],
            file: {
              path: MCP_CONFIG,
              content: JSON.stringify({ mcpServers: mcpServersConfig(ctx.mcpServers) }),
            },
          }
        : undefined;
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
        ...(mcp?.args ?? []),
      ],
      env: {
        HOME: ctx.home,
        ANTHROPIC_BASE_URL: ctx.guardUrl,
        ANTHROPIC_API_KEY: ctx.apiKey,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS: "1",
        CLAUDE_CODE_DISABLE_THINKING: "1",
        CLAUDE_CODE_MAX_RETRIES: "1",
        // The first call of a session carries Claude Code's whole system prompt and tools (18.7K
        // tokens with Qwen's template): on a CPU it is computed for minutes before the first byte.
        // Claude Code gives up on a silent stream after 5 minutes and on a request after 10 by
        // default; the guard's own deadlines and the rollout's time limit are the ones that count.
        API_TIMEOUT_MS: "1800000",
        CLAUDE_STREAM_IDLE_TIMEOUT_MS: "900000",
        // Claude Code runs on Bun, whose HTTP client drops a socket silent for 300 s of its own.
        BUN_CONFIG_HTTP_IDLE_TIMEOUT: "900",
        DISABLE_AUTOUPDATER: "1",
        IS_SANDBOX: "1",
      },
      files: mcp ? [mcp.file] : [],
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
    // Running out of turns is how a rollout's turn limit ends a session, not a harness failure:
    // the verifier scores what the agent left, as for every other harness.
    const outOfTurns = stopReason === "max_turns" || result?.subtype === "error_max_turns";
    if (!result) error = `claude printed no result (exit ${run.exitCode}): ${lastLines(run.stderr)}`;
    else if (result.is_error && !outOfTurns)
      error = `claude reported an error (${stopReason}): ${(result.result ?? "").slice(0, 300)}`;
    return { toolCalls, finalAnswer: result?.result ?? null, stopReason, error };
  },
};
