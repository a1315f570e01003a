import { join } from "node:path";
import { type HarnessAdapter, jsonLines, lastLines } from "./types.ts";

interface PiMessage {
  role?: string;
  content?: { type: string; text?: string }[];
  stopReason?: string;
  errorMessage?: string;
}

/**
 * pi (`@mariozechner/pi-coding-agent`): OpenAI-compatible provider from `models.json` in its agent
 * folder, `--mode json` prints JSON events. pi exits 0 even when the model call failed, so the
 * verdict comes from the last assistant message's `stopReason`, never the exit code alone.
 */
export const pi: HarnessAdapter = {
  name: "pi",
  api: "openai",
  // pi has no MCP client (by design: it extends through its own tools): a task's MCP servers do not reach it.
  mcp: false,
  version: "0.73.1",
  launch(ctx) {
    const agentDir = join(ctx.home, ".pi-agent");
    const models = {
      providers: {
        bridle: {
          baseUrl: `${ctx.guardUrl}/v1`,
          api: "openai-completions",
          apiKey: ctx.apiKey,
          models: [{ id: ctx.model, contextWindow: ctx.contextWindow, maxTokens: 1024 }],
        },
      },
    };
    return {
      command: join(ctx.install.npmRoot, ".bin", "pi"),
      args: [
        "--mode",
        "json",
        "--no-session",
        "--offline",
        "--provider",
        "bridle",
        "--model",
        ctx.model,
        ctx.instruction,
      ],
      env: { PI_OFFLINE: "1", PI_CODING_AGENT_DIR: agentDir, HOME: ctx.home },
      files: [
        { path: ".pi-agent/models.json", content: JSON.stringify(models, null, 2) },
        // A rollout is one task: a summarization call would be an untrained side request in the
        // trajectory, and with a small served context it would fire on every turn.
        {
          path: ".pi-agent/settings.json",
          content: JSON.stringify({ compaction: { enabled: false } }, null, 2),
        },
      ],
    };
  },
  report(run) {
    const events = jsonLines(run.stdout);
    const toolCalls = events
      .filter((e) => e.type === "tool_execution_start")
      .map((e) => String(e.toolName ?? "unknown"));
    const assistant = events
      .filter((e) => e.type === "message_end")
      .map((e) => e.message as PiMessage)
      .filter((m) => m?.role === "assistant");
    const last = assistant.at(-1);
    const text =
      last?.content
        ?.filter((c) => c.type === "text")
        .map((c) => c.text ?? "")
        .join("") ?? "";
    const stopReason = last?.stopReason ?? (events.length === 0 ? "no_output" : "unknown");
    let error: string | null = null;
    if (stopReason === "error" || stopReason === "aborted")
      error = last?.errorMessage ?? `pi stopped with ${stopReason}`;
    else if (!last)
      error = `pi produced no assistant message (exit ${run.exitCode}): ${lastLines(run.stderr)}`;
    else if (run.exitCode !== 0) error = `pi exited with ${run.exitCode}: ${lastLines(run.stderr)}`;
    return { toolCalls, finalAnswer: text || null, stopReason, error };
  },
};
