import { randomBytes, randomUUID } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type {
  AgentStep,
  AgentTask,
  FailureStage,
  RolloutRequest,
  RolloutResult,
  Trajectory,
  VerificationResult,
} from "@bridle/contracts";
import {
  belowMinReward,
  chownTree,
  fromTaskFiles,
  prepareStep,
  resolveTaskEnv,
  rollUpSteps,
  startTaskServices,
} from "@bridle/harbor";
import {
  type BuiltImage,
  type EnvironmentImages,
  imageWorkspace,
  type Mount,
  packFolder,
  Sandbox,
  SandboxSetupError,
  ServiceStartError,
  type TaskServices,
} from "@bridle/sandbox";
import { type ArtifactStore, httpError, type Logger, ServiceError } from "@bridle/service-kit";
import {
  agentTask,
  endSession,
  type RolloutServices,
  registerSession,
  trajectoryUrl,
  verify,
} from "./clients.ts";
import { GuardForwarder } from "./forwarder.ts";
import { type HarnessAdapter, type HarnessInstall, harnesses } from "./harnesses/index.ts";

/** Inside every sandbox: the relay to the guard listens here, and the harness's home is here. */
const GUARD_PORT_INSIDE = 18080;
const HOME_INSIDE = "/home/agent";

export interface RolloutDeps extends RolloutServices {
  log: Logger;
  dataDir: string;
  /** Where a finished agent phase's workspace is packed, for the verifier to fetch by reference. */
  artifacts: ArtifactStore;
  install: HarnessInstall;
  /** Tasks' images unpacked on this host (the tasks service builds them). */
  images?: EnvironmentImages | undefined;
  /** Variables of this host's environment that tasks' `${VAR}` references may read. */
  allowedEnv?: readonly string[];
}

class EnvironmentFailure extends Error {
  constructor(
    readonly stage: FailureStage,
    message: string,
  ) {
    super(message);
  }
}

/** The rollout was cancelled while it ran: its harness and sandbox are gone and nothing is stored. */
export class RolloutCancelled extends Error {
  override name = "RolloutCancelled";
}

function stopIfCancelled(ctx: RolloutContext): void {
  if (ctx.signal.aborted) throw new RolloutCancelled(`rollout ${ctx.rolloutId} was cancelled`);
}

/** A service the rollout needs is down: the caller (a Temporal activity) should retry. */
export function unavailable(what: string, err: unknown): never {
  if (err instanceof ServiceError && !err.retryable) throw err;
  throw httpError(503, "dependency_unavailable", `${what} is unavailable: ${(err as Error).message}`, {
    retryable: true,
  });
}

export function resultPath(dataDir: string, rolloutId: string): string {
  return join(dataDir, "rollouts", rolloutId.replaceAll("/", "_"), "result.json");
}

/**
 * Runs one rollout: guard session, sandboxed harness run, verification. Environment failures
 * (the harness crashed or hung, the model server went away, the verifier produced nothing) give
 * a result with `correctness: null`, never a zero. A finished rollout id returns its stored result.
 * When `signal` aborts, the harness is killed, the sandbox removed, nothing is stored, and this
 * throws RolloutCancelled.
 */
export async function runRollout(
  deps: RolloutDeps,
  request: RolloutRequest,
  signal: AbortSignal = new AbortController().signal,
): Promise<RolloutResult> {
  const rolloutId = request.rolloutId ?? `rollout-${randomUUID()}`;
  const stored = resultPath(deps.dataDir, rolloutId);
  if (existsSync(stored)) return JSON.parse(readFileSync(stored, "utf8")) as RolloutResult;

  const adapter = harnesses[request.harness];
  if (!adapter) {
    throw httpError(
      400,
      "unknown_harness",
      `unknown harness '${request.harness}'; known: ${Object.keys(harnesses).join(", ")}`,
    );
  }
  const log = deps.log.child({ rolloutId, taskId: request.taskId, harness: adapter.name });
  log.info({ model: request.model, capture: request.capture }, "rollout started");
  const started = performance.now();
  const task = await agentTask(deps, request.taskId).catch((err: unknown) => {
    if (err instanceof ServiceError && err.status === 404)
      throw httpError(404, "unknown_task", `no task '${request.taskId}'`);
    return unavailable("the tasks service", err);
  });

  const logs = dirname(stored);
  await mkdir(logs, { recursive: true });
  const result = await execute({ deps, request, adapter, task, rolloutId, logs, log, signal });
  result.durationsMs.total = Math.round(performance.now() - started);
  await writeFile(`${stored}.tmp`, JSON.stringify(result, null, 2));
  await rename(`${stored}.tmp`, stored);
  log.info(
    {
      correctness: result.correctness,
      reward: result.reward,
      toolCalls: result.toolCalls,
      failure: result.environmentFailure,
    },
    "rollout finished",
  );
  return result;
}

interface RolloutContext {
  deps: RolloutDeps;
  request: RolloutRequest;
  adapter: HarnessAdapter;
  task: AgentTask;
  rolloutId: string;
  logs: string;
  log: Logger;
  /** Aborts when the rollout is cancelled. */
  signal: AbortSignal;
}

/** A guard session for one conversation of the rollout, with the key its harness presents. */
interface GuardSession {
  id: string;
  apiKey: string;
}

async function openSession(ctx: RolloutContext, instruction: string, step?: string): Promise<GuardSession> {
  const { deps, request, adapter, task, rolloutId } = ctx;
  const apiKey = `bridle-${randomBytes(18).toString("hex")}`;
  const session = await registerSession(deps, {
    apiKey,
    instruction,
    adapter: request.model,
    // The task's own services are hosts its agent is meant to reach.
    allowedHosts: [...task.guard.allowedHosts, ...task.services.map((service) => service.name)],
    taskPlugins: task.guard.plugins,
    capture: request.capture,
    mode: request.guardMode,
    // Every harness is held to the same number of model calls, whether or not it has a limit of its own.
    maxCalls: request.maxTurns,
    ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
    ...(request.seed === undefined ? {} : { seed: request.seed }),
    labels: {
      ...request.labels,
      rollout: rolloutId,
      task: task.id,
      harness: adapter.name,
      ...(step ? { step } : {}),
    },
  }).catch((err: unknown) => unavailable("the guard", err));
  return { id: session.id, apiKey };
}

async function execute(ctx: RolloutContext): Promise<RolloutResult> {
  const { deps, request, adapter, task, rolloutId } = ctx;
  // A multi-step task talks to the guard in one session per step: each step is a conversation of
  // its own, judged against its own instruction.
  const session = await openSession(ctx, task.steps[0]?.instruction ?? task.instruction, task.steps[0]?.name);

  const result: RolloutResult = {
    rolloutId,
    taskId: task.id,
    harness: adapter.name,
    model: request.model,
    correctness: null,
    reward: null,
    toolCalls: { guard: 0, harness: 0 },
    toolCallFormats: {},
    stitching: {},
    blocked: [],
    stopReason: "not_started",
    finalAnswer: null,
    environmentFailure: null,
    failedAfterBlock: null,
    durationsMs: { harness: 0, verifier: 0, total: 0 },
    servedModels: [],
    refs: { guardSession: session.id, trajectory: trajectoryUrl(deps, session.id), logs: ctx.logs },
  };

  let sandbox: Sandbox | undefined;
  let services: TaskServices | undefined;
  try {
    const image = await imageOf(deps, task);
    const start = image ? imageWorkspace(image, task.workdir) : undefined;
    // The services beside the task's container, up before the agent starts, on a network that
    // only they and the agent's sandbox share.
    const baseDir = join(deps.dataDir, "sandboxes");
    services = await startTaskServices(task.services, {
      images: deps.images,
      allowedEnv: deps.allowedEnv ?? [],
      baseDir,
    }).catch((err: unknown) => {
      if (err instanceof ServiceStartError) throw new EnvironmentFailure("sandbox", err.message);
      throw err;
    });
    sandbox = await Sandbox.create({
      baseDir,
      workdir: task.workdir,
      ...(services ? { network: services.network } : {}),
      // On the task's image the workspace starts as the image has it; the stored files are for
      // hosts without one.
      ...(image ? { image, ...(start ? { environmentDir: start } : {}) } : {}),
    }).catch((err: unknown) => {
      throw new EnvironmentFailure("sandbox", `cannot create the sandbox: ${(err as Error).message}`);
    });
    for (const file of image ? [] : task.environment) {
      await sandbox.writeWorkspaceFile(file.path, Buffer.from(file.base64, "base64"), file.mode);
    }
    if (task.steps.length > 0) await runSteps(ctx, sandbox, session, result);
    else {
      await agentPhase(ctx, sandbox, session, result, {
        instruction: task.instruction,
        timeoutSec: request.agentTimeoutSec ?? task.agentTimeoutSec,
      });
      const verdict = await runVerifier(
        ctx,
        sandbox,
        result,
        result.toolCalls.guard,
        result.blocked.length > 0,
      );
      result.correctness = verdict.outcome.correctness;
      result.reward = verdict.reward;
      if (verdict.outcome.details) result.rewardDetails = verdict.outcome.details;
    }
  } catch (err) {
    if (!(err instanceof EnvironmentFailure)) throw err;
    result.environmentFailure = { stage: err.stage, reason: err.message };
  } finally {
    await sandbox?.dispose().catch((err: unknown) => ctx.log.warn({ err }, "sandbox cleanup failed"));
    await services?.stop().catch((err: unknown) => ctx.log.warn({ err }, "services cleanup failed"));
  }
  if (result.environmentFailure && result.blocked.length > 0) {
    // Blocked means 0, always: a crash, a timeout or a broken verifier after a violation must not
    // turn the rollout into an excluded one. Only rollouts without a violation are excluded.
    result.failedAfterBlock = result.environmentFailure;
    result.environmentFailure = null;
    result.correctness = 0;
    result.reward = 0;
  } else if (result.environmentFailure) {
    result.correctness = null;
    result.reward = null;
  }
  return result;
}

/** The task's image unpacked on this host (fetched from the tasks service when it built it), or an environment failure naming what is missing. */
async function imageOf(deps: RolloutDeps, task: AgentTask): Promise<BuiltImage | undefined> {
  if (!task.image) return undefined;
  let missing = deps.images ? "" : " (no IMAGES_HOME)";
  const image = deps.images
    ? await deps.images.find(task.image.digest).catch((err: unknown) => {
        missing = `, and fetching it from the tasks service failed: ${err instanceof Error ? err.message : String(err)}`;
        return null;
      })
    : null;
  if (!image)
    throw new EnvironmentFailure(
      "sandbox",
      `task ${task.id} runs on the image ${task.image.tag}, which is not built on this host or by the tasks service${missing}`,
    );
  return image;
}

/**
 * One run of the harness on an instruction, then the guard's record of it. The session is ended
 * however the harness ended, so nothing calls the model on its behalf later; its trajectory is read
 * even when the harness failed: the guard's count of what it served explains the failure (and a
 * crash after a tool call is not a crash before any).
 */
async function agentPhase(
  ctx: RolloutContext,
  sandbox: Sandbox,
  session: GuardSession,
  result: RolloutResult,
  phase: { instruction: string; timeoutSec: number; logName?: string },
): Promise<void> {
  let failure: unknown;
  await runHarness(ctx, sandbox, session.apiKey, result, phase).catch((err: unknown) => {
    failure = err;
  });
  const ended = endSession(ctx.deps, session.id);
  if (failure !== undefined && !(failure instanceof EnvironmentFailure)) {
    await ended.catch(() => undefined);
    throw failure;
  }
  applyTrajectory(result, await ended.catch((err: unknown) => unavailable("the guard", err)));
  if (failure) throw failure;
}

/**
 * A multi-step task in one sandbox, as Harbor runs it: per step, its workdir files and setup.sh,
 * the harness on the step's instruction, then the step's tests. A step below its min_reward ends
 * the task; the steps' rewards roll up as the task says (mean or final). Each step is a guard
 * session of its own (its conversation, judged against its instruction); each step's reward counts
 * its own tool calls, and `refs.guardSession` ends as the last step's.
 */
async function runSteps(
  ctx: RolloutContext,
  sandbox: Sandbox,
  first: GuardSession,
  result: RolloutResult,
): Promise<void> {
  const { task, request } = ctx;
  const steps: NonNullable<RolloutResult["steps"]> = [];
  result.steps = steps;
  result.refs.stepSessions = [];
  for (const [i, step] of task.steps.entries()) {
    const session = i === 0 ? first : await openSession(ctx, step.instruction, step.name);
    result.refs.stepSessions.push(session.id);
    result.refs.guardSession = session.id;
    result.refs.trajectory = trajectoryUrl(ctx.deps, session.id);
    const timeoutSec = request.agentTimeoutSec ?? step.agentTimeoutSec;
    const setup = await prepareStep(
      sandbox,
      { name: step.name, workdir: fromTaskFiles(step.workdir) },
      { timeoutMs: timeoutSec * 1000 },
    );
    if (setup) throw new EnvironmentFailure("sandbox", setup);
    const before = result.toolCalls.guard;
    await agentPhase(ctx, sandbox, session, result, {
      instruction: step.instruction,
      timeoutSec,
      logName: stepLog(step),
    });
    const calls = result.toolCalls.guard - before;
    const verdict = await runVerifier(ctx, sandbox, result, calls, result.blocked.length > 0, step);
    const correctness = verdict.outcome.correctness!;
    steps.push({
      name: step.name,
      correctness,
      reward: verdict.reward,
      toolCalls: calls,
      message: verdict.outcome.message,
    });
    const stop = belowMinReward({ correctness, details: verdict.outcome.details }, step.minReward);
    if (stop) {
      steps[steps.length - 1]!.message += ` (the task ends here: ${stop})`;
      break;
    }
  }
  result.correctness = rollUpSteps(
    steps.map((s) => s.correctness),
    task.stepRewards,
  );
  result.reward = rollUpSteps(
    steps.map((s) => s.reward ?? 0),
    task.stepRewards,
  );
}

const stepLog = (step: AgentStep) => `step-${step.name}`;

async function runHarness(
  ctx: RolloutContext,
  sandbox: Sandbox,
  apiKey: string,
  result: RolloutResult,
  phase: { instruction: string; timeoutSec: number; logName?: string },
): Promise<void> {
  const { deps, request, adapter } = ctx;
  // The task's variables ([environment.env], [agent.env]) reach the harness and so its tools; the
  // harness's own settings (its model endpoint, key, home) always win over a task's.
  const taskEnv = resolveTaskEnv(ctx.task.env, deps.allowedEnv ?? [], process.env);
  if (!taskEnv.ok) throw new EnvironmentFailure("task", `task ${ctx.task.id}: ${taskEnv.problem}`);
  const home = await sandbox.scratch("home");
  const launch = adapter.launch({
    workspace: sandbox.workdir,
    home: HOME_INSIDE,
    guardUrl: `http://127.0.0.1:${GUARD_PORT_INSIDE}`,
    apiKey,
    model: request.model,
    instruction: phase.instruction,
    maxTurns: request.maxTurns,
    contextWindow: request.contextWindow,
    mcpServers: adapter.mcp ? ctx.task.mcpServers : [],
    install: deps.install,
  });
  if (!adapter.mcp && ctx.task.mcpServers.length > 0)
    ctx.log.warn(
      { harness: adapter.name, mcpServers: ctx.task.mcpServers.map((s) => s.name) },
      "the task offers MCP servers and this harness has no MCP client: its agent works without them",
    );
  for (const file of launch.files) {
    const target = join(home, file.path);
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, file.content);
  }
  // The harness runs as the task's agent user where it names one ([agent] user), its home theirs.
  const user = ctx.task.user ?? undefined;
  const account = await sandbox.account(user).catch((err: Error) => {
    throw new EnvironmentFailure("task", `task ${ctx.task.id}: task.toml: agent.${err.message}`);
  });
  if (account) await chownTree([home], account);
  const guard = new URL(deps.guardUrl);
  const forwarder = await GuardForwarder.open(join(sandbox.root, "guard.sock"), {
    host: guard.hostname,
    port: Number(guard.port || 80),
  });
  const { timeoutSec } = phase;
  const log = phase.logName ? `${phase.logName}.` : "";
  try {
    const run = await sandbox
      .run([launch.command, ...launch.args], {
        timeoutMs: timeoutSec * 1000,
        env: { ...taskEnv.env, ...launch.env },
        mounts: [
          { source: home, target: HOME_INSIDE, writable: true },
          ...installMounts(adapter, deps.install),
        ],
        guard: { socketPath: forwarder.path, port: GUARD_PORT_INSIDE },
        user,
        maxOutputBytes: 1024 * 1024,
        signal: ctx.signal,
      })
      .catch((err: unknown) => {
        // A task's workdir that clashes with where this host keeps the harness: nothing ran.
        if (err instanceof SandboxSetupError) throw new EnvironmentFailure("sandbox", err.message);
        throw err;
      });
    stopIfCancelled(ctx);
    result.durationsMs.harness += Math.round(run.durationMs);
    await writeFile(join(ctx.logs, `${log}harness.stdout`), run.stdout);
    await writeFile(join(ctx.logs, `${log}harness.stderr`), run.stderr);
    const report = adapter.report({ stdout: run.stdout, stderr: run.stderr, exitCode: run.exitCode, home });
    result.toolCalls.harness += report.toolCalls.length;
    result.stopReason = run.timedOut ? "timeout" : report.stopReason;
    result.finalAnswer = report.finalAnswer;
    if (run.timedOut)
      throw new EnvironmentFailure("harness", `${adapter.name} ran past its ${timeoutSec}s timeout`);
    if (run.oomKilled) throw new EnvironmentFailure("harness", `${adapter.name} ran out of memory`);
    if (report.error) throw new EnvironmentFailure("harness", report.error);
  } finally {
    await forwarder.close();
  }
}

/** Adds one conversation's record (a multi-step task has one per step) to the rollout's figures. */
function applyTrajectory(result: RolloutResult, captured: Trajectory): void {
  result.toolCalls.guard += captured.toolCalls;
  result.blocked.push(
    ...captured.records.flatMap((record) =>
      record.toolCalls
        .filter((call) => call.decision === "block")
        .map((call) => ({ ...(call.rule ? { rule: call.rule } : {}), notice: call.notice ?? "blocked" })),
    ),
  );
  result.servedModels = [
    ...new Set([
      ...result.servedModels,
      ...captured.records.map((r) => r.servedModel).filter((m): m is string => m !== null),
    ]),
  ];
  for (const [format, n] of Object.entries(toolCallFormats(captured)))
    result.toolCallFormats[format] = (result.toolCallFormats[format] ?? 0) + n;
  for (const [how, n] of Object.entries(captured.stitches))
    if (n > 0) result.stitching[how] = (result.stitching[how] ?? 0) + n;
}

/**
 * The tool calls the model server parsed, by the format the model wrote them in (the tool parser
 * tags each call's id: `call_tagged_`, `call_fenced_`, `call_bare_`), and as `unparsed` the
 * answers that look like a call (a JSON "name" with "arguments") but reached the harness as text.
 */
export function toolCallFormats(captured: Trajectory): Record<string, number> {
  const formats: Record<string, number> = {};
  const add = (key: string) => {
    formats[key] = (formats[key] ?? 0) + 1;
  };
  for (const record of captured.records) {
    for (const call of record.toolCalls) add(/^call_(tagged|fenced|bare)_/.exec(call.id)?.[1] ?? "other");
    const text = record.response?.content ?? "";
    if (record.toolCalls.length === 0 && /"name"\s*:/.test(text) && /"(arguments|parameters)"\s*:/.test(text))
      add("unparsed");
  }
  return formats;
}

/**
 * The task's tests (a multi-step task's: the step's) on what the agent left. A verifier that gives
 * no reward is an environment failure.
 */
async function runVerifier(
  ctx: RolloutContext,
  sandbox: Sandbox,
  result: RolloutResult,
  calls: number,
  blocked: boolean,
  step?: AgentStep,
): Promise<VerificationResult> {
  stopIfCancelled(ctx);
  const started = performance.now();
  // Handed over once, by reference: packed here, fetched by the verifier, released when it answered.
  const { artifacts } = ctx.deps;
  const pack = (dir: string) =>
    artifacts.put(packFolder(dir)).catch((err: unknown) => {
      throw new EnvironmentFailure("verifier", `cannot hand the workspace over: ${(err as Error).message}`);
    });
  const workspace = await pack(sandbox.workspace);
  const changes = sandbox.changes
    ? await pack(sandbox.changes).catch(async (err: unknown) => {
        await artifacts.release(workspace);
        throw err;
      })
    : undefined;
  const verdict = await verify(ctx.deps, {
    taskId: ctx.task.id,
    workspace,
    ...(changes ? { changes } : {}),
    ...(step ? { step: step.name } : {}),
    calls,
    blocked,
    mode: ctx.request.rewardMode,
  })
    .catch((err: unknown) => unavailable("the verifier", err))
    .finally(async () => {
      await artifacts.release(workspace);
      if (changes) await artifacts.release(changes);
    });
  result.durationsMs.verifier += Math.round(performance.now() - started);
  await writeFile(
    join(ctx.logs, step ? `${stepLog(step)}.verifier.txt` : "verifier.txt"),
    verdict.outcome.outputTail,
  );
  if (verdict.outcome.correctness === null) {
    throw new EnvironmentFailure(
      "verifier",
      `${step ? `step ${step.name}: ` : ""}${verdict.outcome.failure ?? "failed"}: ${verdict.outcome.message}`,
    );
  }
  return verdict;
}

/** The harness installs, read-only at their own paths (their scripts name them absolutely). */
function installMounts(adapter: HarnessAdapter, install: HarnessInstall): Mount[] {
  if (adapter.name !== "hermes") return [{ source: install.npmRoot, target: install.npmRoot }];
  const mounts: Mount[] = [{ source: install.hermesVenv, target: install.hermesVenv }];
  const python = pythonHome(install.hermesVenv);
  if (python) mounts.push({ source: python, target: python });
  return mounts;
}

/** The base interpreter's prefix a virtual environment points at (`home = <prefix>/bin`). */
function pythonHome(venv: string): string | undefined {
  try {
    const cfg = readFileSync(join(venv, "pyvenv.cfg"), "utf8");
    const home = /^home\s*=\s*(.+)$/m.exec(cfg)?.[1]?.trim();
    return home ? dirname(home) : undefined;
  } catch {
    return undefined;
  }
}
