import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import {
  type CaptureRecord,
  HarnessCheck,
  type HarnessCheckProperty,
  ImportResult,
  RolloutResult,
  Trajectory,
} from "@bridle/contracts";
import { callJson, repoRoot } from "@bridle/service-kit";
import {
  loadStackConfig,
  type Running,
  type StackConfig,
  StackError,
  stackComponents,
  startComponent,
} from "@bridle/stack";
import { CHECK_TASK, checkMoves, spawnScriptedUpstream } from "@bridle/testkit";
import { z } from "zod";

/**
 * `bridle harness check <name|all>`: a conformance check of a pinned harness version. The
 * harness runs unmodified, in the sandbox and through the guard, against a scripted model server:
 * the check's fixed script of sessions, so every move and every answer is known in advance (it
 * checks the harness, not a model). The properties:
 * - `completes`: a session that reads, edits and tests a file solves the task;
 * - `counts`: the tool calls the harness reports equal those the guard released;
 * - `round-trip`: each tool call comes back in the next model call as the same call (name and
 *   arguments) followed by its result;
 * - `prefix`: each model call that carries the tools extends the previous one (by token ids or by
 *   messages), so the conversation trains as one trajectory; where not, which call and why;
 * - `crash-reported`: a model error that ends the harness is a failed rollout, never a completed one;
 * - `timeout-reported`: a harness past its time limit is a failed rollout, never a completed one.
 * Streaming and usage are reported. The result is stored per (harness, version) where the runner
 * reads it: a training run refuses a harness version whose check failed, naming the property.
 */

export interface HarnessCheckOptions {
  /** The context window the harness is told it has (what a training run would pass). */
  contextWindow?: number | undefined;
  /** Where the check's own services listen: this port and the next three. */
  portBase?: number | undefined;
  /** Seconds the timeout session gives the harness. */
  timeoutSec?: number | undefined;
  /** Seconds the solving session may take (a broken configuration can loop until then). */
  solveTimeoutSec?: number | undefined;
}

type Say = (line: string) => void;

/** Where checks are stored: one JSON file per (harness, version), served to the runners by the tasks service. */
export const harnessChecksDir = (config: StackConfig) => join(config.data, "harness-checks");

/** Runs the check for each named harness on a private stack, stores and prints each result. */
export async function harnessCheck(
  config: StackConfig,
  names: string[],
  options: HarnessCheckOptions,
  say: Say,
): Promise<HarnessCheck[]> {
  const unknown = names.filter((n) => !checkMoves[n]);
  if (unknown.length > 0)
    throw new StackError(
      `harness check: no harness ${unknown.map((n) => `'${n}'`).join(", ")} (one of ${Object.keys(checkMoves).join(", ")}, or all)`,
    );
  const stack = await startCheckStack(config, options.portBase ?? config.ports.gateway + 60, say);
  try {
    const results: HarnessCheck[] = [];
    for (const name of names) {
      say(`checking ${name}...`);
      const result = await checkOne(stack, name, options);
      store(config, result);
      printCheck(result, say);
      results.push(result);
    }
    return results;
  } finally {
    await stack.stop();
  }
}

function store(config: StackConfig, result: HarnessCheck): void {
  const dir = harnessChecksDir(config);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${result.harness}@${result.version}.json`);
  writeFileSync(`${file}.tmp`, JSON.stringify(result, null, 2));
  renameSync(`${file}.tmp`, file);
}

export function printCheck(result: HarnessCheck, say: Say): void {
  say(`${result.harness} ${result.version}: ${result.passed ? "passed" : "FAILED"}`);
  for (const p of result.properties) say(`  ${p.passed ? "ok  " : "FAIL"} ${p.name.padEnd(16)} ${p.detail}`);
  say(
    `  streaming: ${result.streaming ? "yes" : "no"}; usage reported: ${result.usage ? "yes" : "no"}; calls joined by token ids ${result.stitching["token-ids"]}, by messages ${result.stitching.messages}, new branches ${result.stitching["new-branch"]}`,
  );
}

interface CheckStack {
  runnerUrl: string;
  guardUrl: string;
  guardAdminToken: string;
  script(turns: unknown[]): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The guard, tasks, verifier and runner as `bridle up` starts them, on ports of their own and a
 * data folder of their own, in front of the scripted model server, with the check's task imported.
 */
async function startCheckStack(config: StackConfig, portBase: number, say: Say): Promise<CheckStack> {
  const data = mkdtempSync(join(tmpdir(), "bridle-harness-check-"));
  const running: Running[] = [];
  const upstream = await spawnScriptedUpstream({ turns: [{ text: "ready" }], select: "conversation" });
  const stop = async () => {
    for (const r of running.reverse()) await r.stop();
    await upstream.stop();
    rmSync(data, { recursive: true, force: true });
  };
  try {
    const checkConfig = loadStackConfig({
      ...process.env,
      BRIDLE_HOME: config.home,
      BRIDLE_DATA: join(data, "data"),
      BRIDLE_PORT_BASE: String(portBase), // of base+0..6 the check uses tasks, guard, runner, verifier
      BRIDLE_VLLM_URL: upstream.url,
      BRIDLE_GUARD_ADMIN_TOKEN: config.guardAdminToken,
      BRIDLE_API_TOKEN: config.apiToken,
    });
    const logs = join(data, "logs");
    mkdirSync(logs, { recursive: true });
    const all = stackComponents(checkConfig);
    for (const name of ["guard", "tasks", "verifier", "runner"]) {
      const component = all.find((c) => c.name === name)!;
      // The check's own runner runs whatever version it checks, a failed one included.
      if (name === "tasks") delete component.env.HARNESS_CHECKS_DIR;
      running.push(await startComponent(component, logs, 120_000));
    }
    const url = (port: number) => `http://${checkConfig.host}:${port}`;
    const imported = await callJson(`${url(checkConfig.ports.tasks)}/v1/tasks/import`, {
      schema: ImportResult,
      body: { path: join(repoRoot, "tasks", CHECK_TASK), runControls: false },
      timeoutMs: 300_000,
    });
    if (!imported.verdicts.every((v) => v.ok))
      throw new Error(`the check's task did not import: ${JSON.stringify(imported.verdicts)}`);
    say(
      `  check stack on ports ${checkConfig.ports.tasks}-${checkConfig.ports.verifier}, scripted model ${upstream.url}`,
    );
    return {
      runnerUrl: url(checkConfig.ports.runner),
      guardUrl: url(checkConfig.ports.guard),
      guardAdminToken: checkConfig.guardAdminToken,
      async script(turns) {
        const res = await fetch(`${upstream.url}/_scripted/script`, {
          method: "PUT",
          body: JSON.stringify({ turns, select: "conversation" }),
        });
        if (!res.ok) throw new Error(`the scripted model refused the script: ${await res.text()}`);
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function checkOne(
  stack: CheckStack,
  harness: string,
  options: HarnessCheckOptions,
): Promise<HarnessCheck> {
  const versions = await callJson(`${stack.runnerUrl}/v1/rollouts/harnesses/list`, {
    schema: z.array(z.object({ name: z.string(), version: z.string() })),
  });
  const version = versions.find((h) => h.name === harness)?.version ?? "unknown";
  const m = checkMoves[harness]!;
  const stamp = Date.now().toString(36);
  const rollout = (session: string, agentTimeoutSec: number) =>
    callJson(`${stack.runnerUrl}/v1/rollouts`, {
      schema: RolloutResult,
      body: {
        rolloutId: `check-${harness}-${session}-${stamp}`,
        taskId: CHECK_TASK,
        harness,
        model: "harness-check",
        agentTimeoutSec,
        maxTurns: 10,
        ...(options.contextWindow ? { contextWindow: options.contextWindow } : {}),
      },
      timeoutMs: (agentTimeoutSec + 300) * 1000,
    });
  const trajectory = (session: string | null) =>
    session
      ? callJson(`${stack.guardUrl}/admin/sessions/${encodeURIComponent(session)}/trajectory`, {
          schema: Trajectory,
          headers: { authorization: `Bearer ${stack.guardAdminToken}` },
        })
      : Promise.resolve(null);

  const properties: HarnessCheckProperty[] = [];
  // 1. Read, test, write the fix, test again, answer.
  const calls = [m.read, m.run("python3 test_slug.py"), m.write, m.run("python3 test_slug.py")];
  await stack.script([
    ...calls.map((call) => ({ tool_calls: [call] })),
    { text: "Fixed slug.py; its test passes." },
  ]);
  const solved = await rollout("solve", options.solveTimeoutSec ?? 180);
  const solvedTrajectory = await trajectory(solved.refs.guardSession);
  const failure = solved.environmentFailure
    ? `${solved.environmentFailure.stage}: ${solved.environmentFailure.reason}`
    : null;
  properties.push({
    name: "completes",
    passed: failure === null && solved.correctness === 1,
    detail: failure ?? `correctness ${solved.correctness} after ${solved.toolCalls.guard} tool calls`,
  });
  properties.push({
    name: "counts",
    passed: solved.toolCalls.harness === solved.toolCalls.guard && solved.toolCalls.guard === calls.length,
    detail: `harness reports ${solved.toolCalls.harness}, guard released ${solved.toolCalls.guard}, script made ${calls.length}`,
  });
  properties.push(roundTrip(solvedTrajectory));
  properties.push(prefix(solvedTrajectory));

  // 2. The model answers with an error the harness cannot retry: the rollout must fail.
  await stack.script([{ error: { status: 400, message: "the harness check's model refuses this request" } }]);
  properties.push(reportedAsFailure("crash-reported", await rollout("crash", 120)));

  // 3. The model never answers in time: the harness is stopped at its limit, the rollout must fail.
  await stack.script([{ text: "too late", first_delay_ms: 60_000 }]);
  properties.push(reportedAsFailure("timeout-reported", await rollout("timeout", options.timeoutSec ?? 15)));

  const records = solvedTrajectory?.records ?? [];
  return HarnessCheck.parse({
    harness,
    version,
    checkedAt: new Date().toISOString(),
    contextWindow: options.contextWindow ?? null,
    passed: properties.every((p) => p.passed),
    properties,
    streaming: records.length > 0 && records.every((r) => r.stream),
    usage: records.length > 0 && records.every((r) => r.usage !== null),
    stitching: solvedTrajectory?.stitches ?? { "token-ids": 0, messages: 0, "new-branch": 0 },
  });
}

function reportedAsFailure(name: string, result: RolloutResult): HarnessCheckProperty {
  const failed = result.environmentFailure;
  return {
    name,
    passed: failed !== null && result.correctness === null && result.reward === null,
    detail: failed
      ? `failed as it should (${failed.stage}: ${failed.reason.slice(0, 120)})`
      : `reported as a completed rollout (stop ${result.stopReason}, correctness ${result.correctness})`,
  };
}

interface OpenAiMessage {
  role?: string;
  tool_call_id?: string;
  tool_calls?: { id?: string; function?: { name?: string; arguments?: string } }[];
}
const messagesOf = (record: CaptureRecord): OpenAiMessage[] =>
  ((record.request as { messages?: OpenAiMessage[] } | null)?.messages ?? []) as OpenAiMessage[];
const hasTools = (record: CaptureRecord) =>
  ((record.request as { tools?: unknown[] } | null)?.tools ?? []).length > 0;
const parsed = (text: string | undefined) => {
  try {
    return JSON.parse(text ?? "");
  } catch {
    return text;
  }
};

/** Each released tool call reappears in a later call as the same call, answered by its result. */
function roundTrip(trajectory: Trajectory | null): HarnessCheckProperty {
  if (!trajectory) return { name: "round-trip", passed: false, detail: "no trajectory was recorded" };
  const records = [...trajectory.records].sort((a, b) => a.seq - b.seq);
  const problems: string[] = [];
  let checked = 0;
  for (const record of records) {
    for (const call of record.toolCalls.filter((c) => c.released)) {
      checked++;
      const later = records.filter((r) => r.seq > record.seq).map(messagesOf);
      const echoed = later.some((messages) =>
        messages.some((msg, i) =>
          (msg.tool_calls ?? []).some(
            (tc) =>
              tc.function?.name === call.name &&
              isDeepStrictEqual(parsed(tc.function?.arguments), parsed(call.arguments)) &&
              messages.slice(i + 1).some((m) => m.role === "tool" && m.tool_call_id === tc.id),
          ),
        ),
      );
      if (!echoed)
        problems.push(`call ${call.name} of model call #${record.seq} never came back with its result`);
    }
  }
  if (checked === 0)
    return { name: "round-trip", passed: false, detail: "the model's tool calls never reached the harness" };
  return {
    name: "round-trip",
    passed: problems.length === 0,
    detail:
      problems.length === 0
        ? `${checked} of ${checked} calls came back with their results`
        : problems.join("; "),
  };
}

/** Every model call that carries the tools extends the one before it: one trajectory to train on. */
function prefix(trajectory: Trajectory | null): HarnessCheckProperty {
  if (!trajectory) return { name: "prefix", passed: false, detail: "no trajectory was recorded" };
  const main = new Set(trajectory.mainBranch);
  const agentCalls = trajectory.records.filter(hasTools).sort((a, b) => a.seq - b.seq);
  const side = trajectory.records.length - agentCalls.length;
  const off = agentCalls.filter((r) => !main.has(r.seq));
  const sideNote =
    side > 0 ? `; ${side} side request(s) without tools (titles, summaries) on branches of their own` : "";
  if (off.length === 0)
    return {
      name: "prefix",
      passed: agentCalls.length > 1,
      detail: `${agentCalls.length} agent calls on one branch (${trajectory.stitches["token-ids"]} joined by token ids, ${trajectory.stitches.messages} by messages)${sideNote}`,
    };
  const why = off.map((r) => {
    const before = agentCalls.filter((a) => a.seq < r.seq).at(-1);
    const shorter = before && messagesOf(r).length <= messagesOf(before).length;
    return `model call #${r.seq} starts a new branch (${shorter ? "its history is shorter than the call before: compaction or a sub-agent" : "it re-writes the earlier conversation: re-serialised messages or arguments"})`;
  });
  return { name: "prefix", passed: false, detail: `${why.join("; ")}${sideNote}` };
}
