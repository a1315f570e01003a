import type { AgentTask, ControlResults, ControlRun, VerifierOutcome } from "@bridle/contracts";
import {
  type BuiltImage,
  imageWorkspace,
  type RunOptions,
  type RunResult,
  Sandbox,
  ServiceStartError,
  type SharedNetwork,
  type TaskServices,
} from "@bridle/sandbox";
import { resolveTaskEnv } from "./env.ts";
import { fromTaskFiles, type TreeFile, writeTree } from "./files.ts";
import type { HarborStep, HarborTask } from "./load.ts";
import { OFFLINE } from "./offline.ts";
import { type BuiltService, startServices } from "./services.ts";
import { belowMinReward, rollUpSteps } from "./steps.ts";
import { phaseEnv } from "./task-toml.ts";
import { lastLine, lastWords, runTests } from "./verify.ts";

export interface ControlOptions {
  /** Where sandboxes are made (the host's temp folder by default). */
  baseDir?: string;
  /** Variables of the user's environment that tasks' `${VAR}` references may read. */
  allowedEnv?: readonly string[];
  /** Runs of each control (2 by default): a verifier whose reward differs between them is flaky. */
  repeats?: number;
  /** The verifier toolchain on the host (see TestRunOptions.toolchain). */
  toolchain?: string | undefined;
  /** The task's built image (see taskImage): its sandboxes run on it. */
  image?: BuiltImage | null | undefined;
  /** The services beside the task's container with their built images (see taskImage): each control starts them afresh. */
  services?: readonly BuiltService[];
}

/**
 * Starts a sandbox on a fresh copy of the task's environment, at the task's workdir: on the task's
 * image when it has one built (the workspace is what the image holds there), else on the host.
 */
export async function sandboxFor(
  task: HarborTask,
  baseDir?: string,
  image?: BuiltImage | null,
  network?: SharedNetwork,
): Promise<Sandbox> {
  const where = { ...(baseDir ? { baseDir } : {}), ...(network ? { network } : {}) };
  if (image) {
    const environmentDir = imageWorkspace(image, task.workdir);
    return Sandbox.create({
      workdir: task.workdir,
      image,
      ...where,
      ...(environmentDir ? { environmentDir } : {}),
    });
  }
  const sandbox = await Sandbox.create({ workdir: task.workdir, ...where });
  await writeTree(sandbox.workspace, task.environment);
  return sandbox;
}

/**
 * The start of a rollout for the runner: a fresh sandbox whose workspace holds the environment of
 * the tasks service's agent view. Tests and solution are not part of that view, so never present.
 */
export async function sandboxForAgent(
  task: Pick<AgentTask, "environment"> & { workdir?: string | undefined },
  baseDir?: string,
): Promise<Sandbox> {
  const sandbox = await Sandbox.create({ workdir: task.workdir, ...(baseDir ? { baseDir } : {}) });
  try {
    await writeTree(sandbox.workspace, fromTaskFiles(task.environment));
  } catch (err) {
    await sandbox.dispose();
    throw err;
  }
  return sandbox;
}

const testOptions = (task: HarborTask, options: ControlOptions) => ({
  tests: task.tests,
  timeoutSec: task.toml.verifier.timeout_sec,
  env: phaseEnv(task.toml).verifier,
  rewardKey: task.toml.verifier.reward_key,
  allowedEnv: options.allowedEnv ?? [],
  memoryMb: task.toml.environment.memory_mb,
  cpus: task.toml.environment.cpus,
  toolchain: options.toolchain,
  user: task.toml.verifier.user,
});

/** The task's own limits on a run, as the sandbox takes them. */
const limitsOf = (task: HarborTask): Pick<RunOptions, "memoryMb" | "cpus"> => ({
  ...(task.toml.environment.memory_mb ? { memoryMb: task.toml.environment.memory_mb } : {}),
  ...(task.toml.environment.cpus ? { cpus: task.toml.environment.cpus } : {}),
});

/**
 * Runs a reference solution's solve.sh (shown at /solution) in the sandbox's workspace, as the
 * agent phase: with the variables the agent sees (`[environment.env]` and `[agent.env]`).
 */
async function runSolution(
  sandbox: Sandbox,
  files: TreeFile[],
  timeoutMs: number,
  task: HarborTask,
  options: ControlOptions,
): Promise<RunResult> {
  const env = resolveTaskEnv(phaseEnv(task.toml).agent, options.allowedEnv ?? [], process.env);
  if (!env.ok)
    return {
      exitCode: 1,
      signal: null,
      stdout: "",
      stderr: env.problem,
      timedOut: false,
      oomKilled: false,
      durationMs: 0,
    };
  const user = task.toml.agent.user;
  const problem = await sandbox.account(user).then(
    () => null,
    (err: Error) => `task.toml: agent.${err.message}`,
  );
  if (problem)
    return {
      exitCode: 1,
      signal: null,
      stdout: "",
      stderr: problem,
      timedOut: false,
      oomKilled: false,
      durationMs: 0,
    };
  const solution = await sandbox.scratch("solution");
  await writeTree(solution, files);
  // As the agent, whose place it takes: its user (`[agent] user`) where the task names one.
  return sandbox.run(["bash", "/solution/solve.sh"], {
    user,
    timeoutMs,
    env: env.env,
    mounts: [{ source: solution, target: "/solution" }],
    reportLeftRunning: true,
    ...limitsOf(task),
  });
}

/** The first line of a run's output that says it could not reach the network, if one does. */
function networkFailure(run: Pick<RunResult, "stdout" | "stderr">): string | undefined {
  return `${run.stderr}\n${run.stdout}`
    .split("\n")
    .find((line) => OFFLINE.test(line))
    ?.trim()
    .slice(0, 200);
}

/**
 * Why tests that need a solution's background processes fail here: Harbor runs them in the
 * agent's live container, Bridle in a fresh sandbox on what the agent changed (the verifier is a
 * service of its own), so a server or daemon the agent started is gone by then. Undefined when the
 * solution left nothing running.
 */
function leftRunningNote(script: string, names: readonly string[] | undefined): string | undefined {
  if (!names || names.length === 0) return undefined;
  return `${script} left ${names.join(", ")} running: the tests run in a fresh sandbox on the files the agent phase changed, not beside its processes as in Harbor's live container, so tests that need them fail here`;
}

/**
 * The task's services started for one control (none when it has none), or the control's
 * environment failure when one does not come up.
 */
async function servicesFor(options: ControlOptions): Promise<TaskServices | undefined | { failure: string }> {
  if (!options.services || options.services.length === 0) return undefined;
  try {
    return await startServices(options.services, {
      allowedEnv: options.allowedEnv ?? [],
      baseDir: options.baseDir,
    });
  } catch (err) {
    if (err instanceof ServiceStartError) return { failure: err.message };
    throw err;
  }
}

/**
 * One control on a fresh sandbox: its agent phase (`act`, which returns a note for the message), then
 * the tests; it must score `expected`, and `mismatch` says what another score means.
 */
async function control(
  kind: "oracle" | "nop",
  task: HarborTask,
  options: ControlOptions,
  attempt: number,
  act: (sandbox: Sandbox) => Promise<string>,
  mismatch: string,
): Promise<ControlRun> {
  if (task.steps.length > 0) return stepsControl(kind, task, options, attempt);
  const expected = kind === "oracle" ? 1 : 0;
  const started = performance.now();
  const opened = await controlSandbox(kind, task, options, attempt, started);
  if ("failed" in opened) return opened.failed;
  const { sandbox } = opened;
  try {
    const note = await act(sandbox);
    const outcome = await opened.tests(() => runTests(sandbox, testOptions(task, options)));
    const reward = outcome.correctness;
    const passed = reward === expected;
    const message = passed
      ? "ok"
      : reward === null
        ? `${kind}: environment failure: ${outcome.message}${note}`
        : `${kind} scored ${reward}, expected ${expected}: ${mismatch}${note}${kind === "oracle" ? testsSaid(outcome.outputTail) : ""}`;
    return {
      control: kind,
      expected,
      reward,
      passed,
      message,
      durationMs: performance.now() - started,
      attempt,
    };
  } finally {
    await opened.end();
  }
}

/**
 * A control's sandbox on the network of the task's services (started for this control alone) and
 * how to end both, or the control's environment failure when a service does not come up. `tests`
 * runs the tests beside the services started afresh, as the verifier starts them for a rollout's
 * tests: what the agent phase left in a service is not there, in a control as in a rollout.
 */
async function controlSandbox(
  kind: "oracle" | "nop",
  task: HarborTask,
  options: ControlOptions,
  attempt: number,
  started: number,
): Promise<
  | {
      sandbox: Sandbox;
      tests: (run: () => Promise<VerifierOutcome>) => Promise<VerifierOutcome>;
      end: () => Promise<void>;
    }
  | { failed: ControlRun }
> {
  const services = await servicesFor(options);
  if (services && "failure" in services) {
    const message = `${kind}: environment failure: ${services.failure}`;
    const expected = kind === "oracle" ? 1 : 0;
    const durationMs = performance.now() - started;
    return { failed: { control: kind, expected, reward: null, passed: false, message, durationMs, attempt } };
  }
  const sandbox = await sandboxFor(task, options.baseDir, options.image, services?.network).catch(
    async (err: unknown) => {
      await services?.stop();
      throw err;
    },
  );
  return {
    sandbox,
    tests: async (run) => {
      if (!services) return run();
      const fresh = await servicesFor(options);
      if (fresh && "failure" in fresh)
        return {
          correctness: null,
          failure: "setup",
          message: `the services for the tests: ${fresh.failure}`,
          exitCode: null,
          durationMs: 0,
          outputTail: "",
        };
      if (!fresh) return run();
      sandbox.joinNetwork(fresh.network);
      try {
        return await run();
      } finally {
        // Back beside the agent phase's services, for a next step.
        sandbox.joinNetwork(services.network);
        await fresh.stop();
      }
    },
    end: async () => {
      await sandbox.dispose();
      await services?.stop();
    },
  };
}

/** The oracle control of a task without solution/solve.sh, which it cannot run. */
export const NO_SOLUTION =
  "oracle: not run: the task has no reference solution (solution/solve.sh), so nothing shows that it can be solved";

/** The oracle control: run the reference solution as the agent phase, then the tests; must score 1. */
function oracle(task: HarborTask, options: ControlOptions, attempt: number): Promise<ControlRun> {
  if (task.steps.length === 0 && !task.solution.some((f) => f.path === "solve.sh"))
    return Promise.resolve({
      control: "oracle",
      expected: 1,
      reward: null,
      passed: false,
      message: NO_SOLUTION,
      durationMs: 0,
      attempt,
    });
  const solve = async (sandbox: Sandbox) => {
    const run = await runSolution(sandbox, task.solution, task.toml.agent.timeout_sec * 1000, task, options);
    if (run.timedOut) return " (solution/solve.sh timed out)";
    if (run.exitCode !== 0) {
      // Its last words say why it failed; a network line before them may be a harmless one (an
      // installer the image stands in for), so both are said.
      const last = run.stderr.trim().split("\n").pop()?.trim().slice(0, 300) ?? "";
      const offline = OFFLINE.test(last) ? last : networkFailure(run);
      const said = offline
        ? [
            ...(offline === last ? [] : [last]),
            `it reaches for the network, which the sandbox does not give: ${offline}`,
          ]
        : [last];
      return ` (solution/solve.sh exited ${run.exitCode}: ${said.filter(Boolean).join("; ")})`;
    }
    const left = leftRunningNote("solution/solve.sh", run.leftRunning);
    return left ? ` (${left})` : "";
  };
  return control("oracle", task, options, attempt, solve, "the reference solution does not pass the tests");
}

/**
 * What the tests said of their failure: pytest's first `FAILED`/`ERROR` line of its short summary
 * (which test, and why), and their last line (a test runner's totals), else their standard error's.
 */
function testsSaid(outputTail: string): string {
  const [stdout = "", stderr = ""] = outputTail.split("\n[stderr]\n");
  // pytest's form only (`FAILED path::test - why`), not unittest's totals (`FAILED (failures=2)`).
  const first = /^(?:FAILED|ERROR) [^\s(]+(?: - .*)?$/m.exec(stdout)?.[0];
  const line = lastLine(stdout, stderr);
  const absent = absentCommands(outputTail);
  const offline = networkFailure({ stdout, stderr });
  const said = [
    ...(offline ? [`the tests reach for the network, which the sandbox does not give: ${offline}`] : []),
    ...(first ? [`first failure: ${first.slice(0, 300)}`] : []),
    ...(absent.length > 0
      ? [`the tests ran ${absent.map((c) => `\`${c}\``).join(", ")}, which the environment does not have`]
      : []),
    ...(line ? [`the tests' last line: ${line.slice(0, 200)}`] : []),
  ];
  return said.length > 0 ? ` (${said.join("; ")})` : "";
}

/**
 * Commands a run tried that are not installed: bash's `name: command not found`, and Python's
 * `FileNotFoundError: ... No such file or directory: 'name'` for a bare name (subprocess running a
 * tool), at most three.
 */
function absentCommands(output: string): string[] {
  const names = new Set<string>();
  for (const m of output.matchAll(/(?:^|[\s:])([A-Za-z0-9][A-Za-z0-9._+-]*): command not found/gm))
    names.add(m[1] as string);
  for (const m of output.matchAll(
    /FileNotFoundError: \[Errno 2\] No such file or directory: '([A-Za-z0-9][A-Za-z0-9._+-]*)'/g,
  ))
    names.add(m[1] as string);
  return [...names].slice(0, 3);
}

/** The nop control: no agent phase at all, then the tests; must score 0. */
function nop(task: HarborTask, options: ControlOptions, attempt: number): Promise<ControlRun> {
  return control("nop", task, options, attempt, async () => "", "the tests pass without any work");
}

/**
 * Readies the workspace for a step: copies steps/<name>/workdir/ into it, then runs its setup.sh
 * there, as Harbor does. A failed setup is the step's environment failure: what it says, or null.
 */
export async function prepareStep(
  sandbox: Sandbox,
  step: Pick<HarborStep, "name" | "workdir">,
  limits: Pick<RunOptions, "timeoutMs" | "memoryMb" | "cpus">,
): Promise<string | null> {
  if (step.workdir.length === 0) return null;
  await writeTree(sandbox.workspace, step.workdir);
  if (!step.workdir.some((f) => f.path === "setup.sh")) return null;
  const setup = await sandbox.run(["bash", `${sandbox.workdir}/setup.sh`], limits);
  if (setup.timedOut) return `steps/${step.name}/workdir/setup.sh ran past ${limits.timeoutMs / 1000} s`;
  if (setup.exitCode !== 0)
    return `steps/${step.name}/workdir/setup.sh exited ${setup.exitCode ?? setup.signal}${lastWords(setup.stderr, setup.stdout)}`;
  return null;
}

/**
 * A control of a multi-step task, in one sandbox as the agent's run: per step, its workdir and
 * setup, then (oracle) its solution, then its tests; a step below its min_reward ends the run. The
 * steps' rewards roll up as the task says; the oracle must reach 1, the nop 0.
 */
async function stepsControl(
  control: "oracle" | "nop",
  task: HarborTask,
  options: ControlOptions,
  attempt: number,
): Promise<ControlRun> {
  const started = performance.now();
  const expected = control === "oracle" ? 1 : 0;
  const limits = limitsOf(task);
  const opened = await controlSandbox(control, task, options, attempt, started);
  if ("failed" in opened) return opened.failed;
  const { sandbox } = opened;
  const said: string[] = [];
  let failure: string | null = null;
  const scores: number[] = [];
  try {
    for (const step of task.steps) {
      const timeoutMs = step.agentTimeoutSec * 1000;
      failure = await prepareStep(sandbox, step, { timeoutMs, ...limits });
      if (failure) break;
      if (control === "oracle" && step.solution.some((f) => f.path === "solve.sh")) {
        const solve = await runSolution(sandbox, step.solution, timeoutMs, task, options);
        if (solve.timedOut || solve.exitCode !== 0) {
          const offline = solve.timedOut ? undefined : networkFailure(solve);
          said.push(
            `steps/${step.name}/solution/solve.sh ${solve.timedOut ? "timed out" : `exited ${solve.exitCode}`}${offline ? `, reaching for the network, which the sandbox does not give: ${offline}` : ""}`,
          );
        }
        const left = leftRunningNote(`steps/${step.name}/solution/solve.sh`, solve.leftRunning);
        if (left) said.push(left);
      }
      const outcome = await opened.tests(() =>
        runTests(sandbox, {
          ...testOptions(task, options),
          tests: step.tests,
          timeoutSec: step.verifierTimeoutSec,
          env: step.verifierEnv,
        }),
      );
      if (outcome.correctness === null) {
        failure = `step ${step.name}: ${outcome.message}`;
        break;
      }
      scores.push(outcome.correctness);
      said.push(`step ${step.name}: ${outcome.correctness}`);
      const stop = belowMinReward(
        { correctness: outcome.correctness, details: outcome.details },
        step.minReward,
      );
      if (stop) {
        said.push(`stopped after ${step.name} (${stop})`);
        break;
      }
    }
  } finally {
    await opened.end();
  }
  const reward = failure ? null : rollUpSteps(scores, task.stepRewards);
  const passed = reward === expected;
  const steps = said.length > 0 ? ` (${said.join("; ")})` : "";
  const message = passed
    ? "ok"
    : reward === null
      ? `${control}: environment failure: ${failure ?? "no step ran"}`
      : control === "oracle"
        ? `oracle scored ${reward}, expected 1: the reference solutions do not pass the steps' tests${steps}`
        : `nop scored ${reward}, expected 0: the steps' tests pass without any work${steps}`;
  return { control, expected, reward, passed, message, durationMs: performance.now() - started, attempt };
}

/**
 * Runs both controls on a task in fresh sandboxes, each `repeats` times. A control whose verifier
 * gives different rewards on identical runs is flaky: its reward would be noise in training, so
 * the task fails its controls whatever the single runs scored.
 */
export async function runControls(task: HarborTask, options: ControlOptions = {}): Promise<ControlResults> {
  const repeats = options.repeats ?? 2;
  if (!Number.isInteger(repeats) || repeats < 1 || repeats > 10)
    throw new Error(`control repeats must be an integer from 1 to 10, got ${repeats}`);
  const runs: ControlRun[] = [];
  for (let attempt = 1; attempt <= repeats; attempt++) runs.push(await oracle(task, options, attempt));
  for (let attempt = 1; attempt <= repeats; attempt++) runs.push(await nop(task, options, attempt));
  const flaky = (["oracle", "nop"] as const).filter(
    (control) => new Set(runs.filter((r) => r.control === control).map((r) => r.reward)).size > 1,
  );
  const failed = runs.filter((r) => !r.passed);
  return {
    passed: flaky.length === 0 && failed.length === 0,
    hash: task.hash,
    checkedAt: new Date().toISOString(),
    repeats,
    flaky,
    unproven: flaky.length === 0 && failed.length > 0 && failed.every((r) => r.message === NO_SOLUTION),
    runs,
  };
}

/** What is wrong with a task's controls, one line each: failed controls once, then flaky ones. */
export function controlProblems(controls: ControlResults): string[] {
  const problems = new Set(controls.runs.filter((r) => !r.passed).map((r) => r.message));
  for (const control of controls.flaky) {
    const rewards = controls.runs.filter((r) => r.control === control).map((r) => r.reward ?? "none");
    problems.add(
      `${control}: the verifier gave different rewards on ${rewards.length} identical runs (${rewards.join(", ")}): its reward is not reproducible`,
    );
  }
  return [...problems];
}
