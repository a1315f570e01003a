import { existsSync } from "node:fs";
import { join } from "node:path";
import type { McpServer } from "@bridle/contracts";
import Database from "better-sqlite3";
import { type HarnessAdapter, lastLines } from "./types.ts";

interface Row {
  role: string;
  content: string | null;
  tool_calls: string | null;
  finish_reason: string | null;
}

/** The `mcp_servers:` table of Hermes' config.yaml (JSON strings are YAML strings). */
function mcpServersYaml(servers: McpServer[]): string[] {
  if (servers.length === 0) return [];
  return [
    "mcp_servers:",
    ...servers.flatMap((server) => [
      `  ${JSON.stringify(server.name)}:`,
      ...(server.transport === "stdio"
        ? [`    command: ${JSON.stringify(server.command)}`, `    args: ${JSON.stringify(server.args)}`]
        : [
            `    url: ${JSON.stringify(server.url)}`,
            ...(server.transport === "sse" ? ["    transport: sse"] : []),
          ]),
    ]),
  ];
}

/**
 * Hermes Agent (PyPI `hermes-agent`): a custom OpenAI-compatible provider in
 * `$HERMES_HOME/config.yaml`, run as `hermes --yolo chat -q ... -Q`. Its quiet output is only the
 * final answer, so the tool calls are read from the transcript Hermes keeps in
 * `$HERMES_HOME/state.db`. Memory, skills and checkpoints are off; the context floor is met by
 * declaring the context length.
 */
export const hermes: HarnessAdapter = {
  name: "hermes",
  api: "openai",
  mcp: true,
  version: "0.19.0",
  launch(ctx) {
    const hermesHome = join(ctx.home, ".hermes");
    const config = [
      "model:",
      `  default: ${JSON.stringify(ctx.model)}`,
      "  provider: custom:bridle",
      `  context_length: ${Math.max(ctx.contextWindow, 65_536)}`, // Hermes refuses a context under 64K
      "custom_providers:",
      "  - name: bridle",
      `    base_url: ${JSON.stringify(`${ctx.guardUrl}/v1`)}`,
      "    key_env: BRIDLE_SESSION_KEY",
      "    api_mode: chat_completions",
      // Each MCP server's tools are a toolset of their own (`mcp-<server>`), named `mcp__<server>__<tool>`.
      `toolsets: [${["terminal", "file", ...ctx.mcpServers.map((s) => `mcp-${s.name}`)].join(", ")}]`,
      ...mcpServersYaml(ctx.mcpServers),
      "agent:",
      `  max_turns: ${ctx.maxTurns}`,
      "memory:",
      "  memory_enabled: false",
      "  user_profile_enabled: false",
      "checkpoints:",
      "  enabled: false",
      "",
    ].join("\n");
    return {
      command: join(ctx.install.hermesVenv, "bin", "hermes"),
      args: [
        "--yolo",
        "chat",
        "-q",
        ctx.instruction,
        "-Q",
        "--provider",
        "custom:bridle",
        "--model",
        ctx.model,
        "--max-turns",
        String(ctx.maxTurns),
      ],
      env: { HOME: ctx.home, HERMES_HOME: hermesHome, BRIDLE_SESSION_KEY: ctx.apiKey, PYTHONUNBUFFERED: "1" },
      files: [{ path: ".hermes/config.yaml", content: config }],
    };
  },
  report(run) {
    const db = join(run.home, ".hermes", "state.db");
    if (!existsSync(db)) {
      return {
        toolCalls: [],
        finalAnswer: null,
        stopReason: "no_output",
        error: `hermes kept no transcript (exit ${run.exitCode}): ${lastLines(run.stderr)}`,
      };
    }
    const rows = readTranscript(db);
    const toolCalls = rows.flatMap((row) => toolNames(row.tool_calls));
    const last = rows.filter((r) => r.role === "assistant").at(-1);
    const answer = run.stdout
      .split("\n")
      .filter((line) => !/^session_id:|tirith/.test(line.trim()))
      .join("\n")
      .trim();
    let error: string | null = null;
    if (run.exitCode !== 0) error = `hermes exited with ${run.exitCode}: ${lastLines(run.stderr)}`;
    else if (!last) error = `hermes recorded no assistant message: ${lastLines(run.stderr)}`;
    return {
      toolCalls,
      finalAnswer: answer || last?.content || null,
      stopReason: last?.finish_reason ?? "stop",
      error,
    };
  },
};

function readTranscript(file: string): Row[] {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return db
      .prepare("SELECT role, content, tool_calls, finish_reason FROM messages ORDER BY id")
      .all() as Row[];
  } finally {
    db.close();
  }
}

function toolNames(json: string | null): string[] {
  if (!json) return [];
  try {
    const calls = JSON.parse(json) as { function?: { name?: string }; name?: string }[];
    return Array.isArray(calls) ? calls.map((c) => c.function?.name ?? c.name ?? "unknown") : [];
  } catch {
    return ["unparseable"];
  }
}
