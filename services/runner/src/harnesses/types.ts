import type { McpServer } from "@bridle/contracts";

/**
 * A harness adapter teaches the runner one coding-agent harness: how to point its model endpoint
 * at the guard, how to run it headless on an instruction, and how to read what it did. Adapters
 * never patch the harness; they only write its own configuration and read its own output.
 * Adding a harness is one adapter file, registered in `index.ts`, and its test.
 */

/** Where the pinned harness installs live (from the bootstrap). */
export interface HarnessInstall {
  /** `node_modules` of the npm harnesses (pi, OpenCode, Claude Code). */
  npmRoot: string;
  /** Hermes' own virtual environment. */
  hermesVenv: string;
}

/** Everything an adapter needs to launch one rollout. Paths are as the harness sees them. */
export interface HarnessContext {
  workspace: string;
  /** A throwaway home folder for the harness's configuration and state. */
  home: string;
  /** The guard's base URL as reachable from inside the sandbox, without `/v1`. */
  guardUrl: string;
  /** The rollout's session key: the guard knows the session by it. */
  apiKey: string;
  /** The model name the harness sends; the guard routes it to the session's adapter. */
  model: string;
  instruction: string;
  /** Upper bound on agent turns, where the harness has such a setting. */
  maxTurns: number;
  /** The served model's context window, as the harness should budget it. */
  contextWindow: number;
  /**
   * The task's MCP servers (Harbor's `[[environment.mcp_servers]]`), for the harness's own MCP
   * client; one over HTTP is reached by the name of the task's service that serves it.
   */
  mcpServers: McpServer[];
  install: HarnessInstall;
}

export interface HarnessLaunch {
  command: string;
  args: string[];
  env: Record<string, string>;
  /** Configuration files to write before the run, relative to `home`. */
  files: { path: string; content: string }[];
}

/** What the harness did, read from its own machine-readable output. */
export interface HarnessReport {
  toolCalls: string[];
  finalAnswer: string | null;
  /** The harness's own reason for stopping (`stop`, `error`, `max_turns`, ...). */
  stopReason: string;
  /** Set when the harness failed (its model call failed, it crashed, its output was unreadable). */
  error: string | null;
}

export interface HarnessRun {
  stdout: string;
  stderr: string;
  exitCode: number | null;
  /** The home folder after the run, for harnesses that keep their transcript there. */
  home: string;
}

export interface HarnessAdapter {
  name: string;
  /** The API the harness speaks to its model endpoint. */
  api: "openai" | "anthropic";
  /** Whether the harness has an MCP client, so a task's MCP servers reach its agent. */
  mcp: boolean;
  version: string;
  launch(context: HarnessContext): HarnessLaunch;
  report(run: HarnessRun): HarnessReport;
}

/** Parses JSON lines, skipping lines that are not JSON (banners, warnings). */
export function jsonLines(text: string): Record<string, unknown>[] {
  const events: Record<string, unknown>[] = [];
  for (const line of text.split("\n")) {
    const trimmed = line.trim();
    if (!trimmed.startsWith("{")) continue;
    try {
      events.push(JSON.parse(trimmed) as Record<string, unknown>);
    } catch {
      // a partial line from a killed process: the rest still counts
    }
  }
  return events;
}

export const lastLines = (text: string, n = 5) => text.trim().split("\n").slice(-n).join("\n");
