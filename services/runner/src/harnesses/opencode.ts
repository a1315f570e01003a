import { join } from "node:path";
import { type HarnessAdapter, jsonLines, lastLines } from "./types.ts";

interface OpenCodePart {
  type?: string;
  tool?: string;
  text?: string;
  reason?: string;
}

/**
 * OpenCode (`opencode-ai`): configured through `OPENCODE_CONFIG_CONTENT` with an OpenAI-compatible
 * provider; `run --format json` prints one event per line (`tool_use`, `text`, `step_finish`,
 * `error`). `--title` avoids the extra title-generation request.
 */
export const opencode: HarnessAdapter = {
  name: "opencode",
  api: "openai",
  mcp: true,
  version: "1.18.33",
  launch(ctx) {
    const config = {
      $schema: "https://opencode.ai/config.json",
      share: "disabled",
      autoupdate: false,
      provider: {
        bridle: {
          npm: "@ai-sdk/openai-compatible",
          name: "Bridle",
          options: { baseURL: `${ctx.guardUrl}/v1`, apiKey: ctx.apiKey },
          models: {
            [ctx.model]: {
              name: ctx.model,
              tool_call: true,
              limit: { context: ctx.contextWindow, output: 1024 },
            },
          },
        },
      },
      // The task's MCP servers: their tools are `<server>_<tool>`.
      mcp: Object.fromEntries(
        ctx.mcpServers.map((server) => [
          server.name,
          server.transport === "stdio"
            ? { type: "local", command: [server.command, ...server.args], enabled: true }
            : { type: "remote", url: server.url, enabled: true },
        ]),
      ),
    };
    return {
      command: join(ctx.install.npmRoot, ".bin", "opencode"),
      args: [
        "run",
        "--format",
        "json",
        "--title",
        "bridle rollout",
        "-m",
        `bridle/${ctx.model}`,
        ctx.instruction,
      ],
      env: {
        HOME: ctx.home,
        XDG_CONFIG_HOME: join(ctx.home, ".config"),
        XDG_DATA_HOME: join(ctx.home, ".local/share"),
        XDG_CACHE_HOME: join(ctx.home, ".cache"),
        XDG_STATE_HOME: join(ctx.home, ".local/state"),
        OPENCODE_CONFIG_CONTENT: JSON.stringify(config),
        OPENCODE_DISABLE_MODELS_FETCH: "1",
        OPENCODE_DISABLE_AUTOUPDATE: "1",
        OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
      },
      files: [],
    };
  },
  report(run) {
    const events = jsonLines(run.stdout);
    const parts = (type: string) =>
      events.filter((e) => e.type === type).map((e) => (e.part ?? {}) as OpenCodePart);
    const toolCalls = parts("tool_use").map((p) => p.tool ?? "unknown");
    const texts = parts("text").map((p) => p.text ?? "");
    const finishes = parts("step_finish");
    const errors = events.filter((e) => e.type === "error");
    // OpenCode stops a model that repeats the same call three times (its doom-loop guard asks for
    // permission, and a headless run refuses it): the model's doing, scored like any other end of
    // a session, never an environment failure.
    const lastError = errors.at(-1) as { error?: { data?: { message?: string } } } | undefined;
    const refused = /rejected permission/.test(lastError?.error?.data?.message ?? "");
    const stopReason = refused
      ? "permission_rejected"
      : (finishes.at(-1)?.reason ?? (errors.length > 0 ? "error" : "no_output"));
    let error: string | null = null;
    if (refused) return { toolCalls, finalAnswer: texts.at(-1) ?? null, stopReason, error };
    if (errors.length > 0)
      error = `opencode reported an error: ${JSON.stringify(errors.at(-1)).slice(0, 500)}`;
    else if (run.exitCode !== 0) error = `opencode exited with ${run.exitCode}: ${lastLines(run.stderr)}`;
    else if (finishes.length === 0) error = `opencode finished no step: ${lastLines(run.stderr)}`;
    return { toolCalls, finalAnswer: texts.at(-1) ?? null, stopReason, error };
  },
};
