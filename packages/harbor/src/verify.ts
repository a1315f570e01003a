import { existsSync } from "node:fs";
import { lchown, readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import type { VerifierOutcome } from "@bridle/contracts";
import { SANDBOX_PATH, type Sandbox } from "@bridle/sandbox";
import { resolveTaskEnv } from "./env.ts";
import { type TreeFile, writeTree } from "./files.ts";
import { PACKAGES_DIR } from "./image.ts";
import { requirementName, wheelName } from "./packages.ts";

export interface TestRunOptions {
  tests: TreeFile[];
  timeoutSec: number;
  env?: Record<string, string>;
  /** The key of a several-key reward.json that is the reward, when it has no `reward` key. */
  rewardKey?: string | undefined;
  /** Variables of the user's environment that `${VAR}` in `env` may read; no other is read. */
  allowedEnv?: readonly string[];
  memoryMb?: number | undefined;
  maxPids?: number;
  cpus?: number | undefined;
  /**
   * The verifier toolchain on the host (`<BRIDLE_HOME>/toolchain`: pytest and the plugins Harbor
   * tasks pin, installed with Bridle), shown read-only to the tests only, as TOOLCHAIN_DIR.
   */
  toolchain?: string | undefined;
  /** Who the tests run as on the task's image (`[verifier] user`); root when absent. */
  user?: string | number | undefined;
}

/** Where the verifier toolchain appears inside the sandbox, during verification only. */
export const TOOLCHAIN_DIR = "/opt/bridle/toolchain";

/**
 * The tests' view of the toolchain: mounted at TOOLCHAIN_DIR, its `bin` (uv, uvx, pytest and the
 * env script) also where uv's installer puts them, `$HOME/.local/bin` (the sandbox's HOME is
 * /tmp), so a test.sh whose `curl ... install.sh | sh` cannot reach the network still finds uv
 * installed. uv works offline from the toolchain's wheels (and the image's, see withPackages) and
 * never downloads a Python: it finds the sandbox's python3 and the toolchain's CPython 3.13
 * (`python-bin/python3.13`, for Terminal-Bench 2's `uvx -p 3.13`); a test that asks for another
 * (`uvx -p 3.12`) fails naming it.
 */
function toolchainFor(
  host: string | undefined,
  sandbox: Sandbox,
): {
  mounts: { source: string; target: string }[];
  env: Record<string, string>;
} {
  if (!host || !existsSync(host)) return { mounts: [], env: {} };
  // The wheels of what the task's scripts install, where its image was built with them
  // (withPackages): the image's own, read-only over what the agent phase may have changed there.
  const rootfs = sandbox.image?.rootfs;
  const imageWheels = rootfs && existsSync(join(rootfs, PACKAGES_DIR)) ? join(rootfs, PACKAGES_DIR) : null;
  const wheels = [`${TOOLCHAIN_DIR}/wheels`, ...(imageWheels ? [PACKAGES_DIR] : [])];
  return {
    mounts: [
      { source: host, target: TOOLCHAIN_DIR },
      { source: join(host, "bin"), target: "/tmp/.local/bin" },
      ...(imageWheels ? [{ source: imageWheels, target: PACKAGES_DIR }] : []),
    ],
    env: {
      // The image's own PATH first (an ENV PATH="/opt/venv/bin:$PATH" holds the tests' python);
      // python-bin (CPython 3.13) last: a plain `uv venv` keeps the sandbox's own python3.
      PATH: `${sandbox.image?.env?.PATH ?? SANDBOX_PATH}:${TOOLCHAIN_DIR}/bin:${TOOLCHAIN_DIR}/python-bin`,
      PYTHONPATH: `${TOOLCHAIN_DIR}/python`,
      UV_OFFLINE: "1",
      UV_NO_INDEX: "1",
      UV_FIND_LINKS: wheels.join(","),
      PIP_FIND_LINKS: wheels.join(" "),
      PIP_NO_INDEX: "1",
      UV_PYTHON_DOWNLOADS: "never",
      UV_NO_PROGRESS: "1",
    },
  };
}

type Reward = { value: number; details?: Record<string, number> } | { error: string };

/**
 * Reads `reward.txt` (one number), else `reward.json` (a flat map of numbers, as Harbor writes it):
 * its `reward` key when present, else the task's `rewardKey`, else the mean of its numbers. Every
 * number is kept as the outcome's details.
 */
export async function readReward(logs: string, rewardKey?: string): Promise<Reward | null> {
  const text = await readFile(join(logs, "reward.txt"), "utf8").catch(() => null);
  if (text !== null) {
    const value = Number(text.trim());
    if (text.trim() === "" || !Number.isFinite(value))
      return { error: `reward.txt holds ${JSON.stringify(text.trim().slice(0, 40))}, not a number` };
    return { value };
  }
  const json = await readFile(join(logs, "reward.json"), "utf8").catch(() => null);
  if (json === null) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    return { error: "reward.json is not valid JSON" };
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    return { error: "reward.json is not an object" };
  const entries = Object.entries(parsed);
  if (!entries.every(([, v]) => typeof v === "number" && Number.isFinite(v))) {
    return { error: "reward.json must map names to numbers" };
  }
  if (entries.length === 0) return { error: "reward.json holds no number" };
  const details = Object.fromEntries(entries) as Record<string, number>;
  if ("reward" in details) return { value: details.reward as number, details };
  if (rewardKey !== undefined) {
    const value = details[rewardKey];
    if (value === undefined)
      return {
        error: `reward.json has no key ${JSON.stringify(rewardKey)} (the task's verifier.reward_key)`,
      };
    return { value, details };
  }
  const values = Object.values(details);
  return { value: values.reduce((a, b) => a + b, 0) / values.length, details };
}

/**
 * The verifier phase: copies the tests in (at /tests), runs `bash /tests/test.sh` in the workspace
 * with a fresh /logs/verifier, and reads the reward. Anything but a reward in [0, 1] is an
 * environment failure: correctness null, with the reason, never 0.
 */
export async function runTests(sandbox: Sandbox, options: TestRunOptions): Promise<VerifierOutcome> {
  const env = resolveTaskEnv(options.env ?? {}, options.allowedEnv ?? [], process.env);
  if (!env.ok) {
    const message = `task.toml: verifier.${env.problem}`;
    return { correctness: null, failure: "setup", message, exitCode: null, durationMs: 0, outputTail: "" };
  }
  const account = await sandbox.account(options.user).then(
    (found) => ({ found }),
    (err: Error) => ({ problem: err.message }),
  );
  if ("problem" in account) {
    const message = `task.toml: verifier.${account.problem}`;
    return { correctness: null, failure: "setup", message, exitCode: null, durationMs: 0, outputTail: "" };
  }
  const tests = await sandbox.scratch("tests");
  const logs = await sandbox.scratch("verifier-logs");
  await writeTree(tests, options.tests);
  // A user other than root writes the reward and may write beside the tests, as root would.
  if (account.found) await chownTree([tests, logs], account.found);
  const toolchain = toolchainFor(options.toolchain, sandbox);
  const run = await sandbox.run(["bash", "/tests/test.sh"], {
    timeoutMs: options.timeoutSec * 1000,
    // The task's own variables last: a task that sets PATH or PYTHONPATH keeps its own. HOME is
    // /tmp for any user, where the toolchain puts uv as its installer would.
    env: { HOME: "/tmp", ...toolchain.env, ...env.env },
    user: options.user,
    mounts: [
      { source: tests, target: "/tests", writable: true },
      { source: logs, target: "/logs/verifier", writable: true },
      ...toolchain.mounts,
    ],
    ...(options.memoryMb === undefined ? {} : { memoryMb: options.memoryMb }),
    ...(options.maxPids === undefined ? {} : { maxPids: options.maxPids }),
    ...(options.cpus === undefined ? {} : { cpus: options.cpus }),
  });
  const outputTail = `${run.stdout}${run.stderr ? `\n[stderr]\n${run.stderr}` : ""}`.slice(-4_000);
  const base = { exitCode: run.exitCode, durationMs: run.durationMs, outputTail };
  if (run.timedOut) {
    return {
      ...base,
      correctness: null,
      failure: "timeout",
      message: `tests/test.sh ran past ${options.timeoutSec} s`,
    };
  }
  const reward = await readReward(logs, options.rewardKey);
  if (reward && "error" in reward)
    return { ...base, correctness: null, failure: "bad_reward", message: reward.error };
  // Looked for only when the tests did not pass: a passing run's output is never read twice.
  const missing =
    reward && reward.value >= 1 ? [] : await unavailablePackages(run.stdout, run.stderr, options, sandbox);
  if (reward && reward.value < 1 && missing.length > 0) {
    // The tests could not install what they run with: the score measures the toolchain, not the
    // agent, so it is excluded, naming what was missing.
    return {
      ...base,
      correctness: null,
      failure: "setup",
      message: `the tests need ${missing.join(", ")}, which the offline verifier toolchain does not hold (reward ${reward.value} not counted)`,
    };
  }
  if (reward) {
    if (reward.value < 0 || reward.value > 1) {
      return {
        ...base,
        correctness: null,
        failure: "bad_reward",
        message: `reward ${reward.value} is outside [0, 1]`,
      };
    }
    return {
      ...base,
      correctness: reward.value,
      failure: null,
      message: `reward ${reward.value}`,
      ...(reward.details ? { details: reward.details } : {}),
    };
  }
  if (run.oomKilled)
    return { ...base, correctness: null, failure: "crashed", message: "tests ran out of memory" };
  // pytest ran and reported failing tests, and the script stopped there (`set -e` before writing
  // its reward, a common slip): the tests judged the work, so it scores 0, not an exclusion.
  const failedSummary = missing.length === 0 ? pytestFailures(`${run.stdout}\n${run.stderr}`) : undefined;
  if (run.exitCode !== 0 && failedSummary) {
    return {
      ...base,
      correctness: 0,
      failure: null,
      message: `reward 0: tests/test.sh exited ${run.exitCode ?? run.signal} without writing a reward after pytest reported failures (${failedSummary})`,
    };
  }
  if (run.exitCode !== 0) {
    return {
      ...base,
      correctness: null,
      failure: "crashed",
      message: `tests/test.sh exited ${run.exitCode ?? run.signal} without writing a reward${missing.length > 0 ? ` (the offline verifier toolchain does not hold ${missing.join(", ")})` : ""}${lastWords(run.stderr, run.stdout)}`,
    };
  }
  return {
    ...base,
    correctness: null,
    failure: "no_reward",
    message: "tests/test.sh wrote no /logs/verifier/reward.txt or reward.json",
  };
}

/** pytest's last summary line when it reports failed tests (`== 1 failed, 2 passed in 0.1s ==`). */
export function pytestFailures(output: string): string | undefined {
  const lines = [...output.matchAll(/^=+ (.*\bin [\d.]+s\b.*?) =+$/gm)];
  const last = lines.at(-1)?.[1];
  return last && /\b\d+ failed\b/.test(last) ? last.replace(/\s*\(.*\)$/, "") : undefined;
}

/**
 * Packages the tests asked uv or pip for that could not be had offline, as their error lines name
 * them (`Because pyyaml was not found in the cache and you require pyyaml==6.0.2`, pip's `No
 * matching distribution found for pandas==2.3.0`). Only the resolvers' own phrasing counts.
 */
export function missingPackages(...texts: string[]): string[] {
  const found = new Set<string>();
  for (const text of texts) {
    // uv wraps its explanation across lines; joined, the sentence reads whole.
    const flat = text.replace(/\n\s+/g, " ");
    for (const m of flat.matchAll(
      /Because (\S+) was not found in the (?:cache|provided package locations)(?: and you require ([^,\s]+))?/g,
    ))
      found.add(m[2] ?? m[1]!);
    for (const m of flat.matchAll(/No matching distribution found for ([^\s]+)/g)) found.add(m[1]!);
  }
  return [...found];
}

const normalized = (text: string) => text.toLowerCase().replace(/[-_.]+/g, "-");

/**
 * The packages the resolvers said they could not find that were really missing: named by the
 * task's own test files (an agent's program printing a resolver's words does not turn its 0 into
 * an exclusion) and absent from the toolchain's wheels and the image's (then it was not missing,
 * whatever was printed).
 */
async function unavailablePackages(
  stdout: string,
  stderr: string,
  options: TestRunOptions,
  sandbox: Sandbox,
): Promise<string[]> {
  const printed = missingPackages(stdout, stderr);
  if (printed.length === 0) return [];
  const tests = options.tests.map((f) => normalized(f.content.toString("utf8")));
  // Read without holding up the service's other work; a toolchain without wheels holds nothing.
  const folders = [
    ...(options.toolchain ? [join(options.toolchain, "wheels")] : []),
    ...(sandbox.image ? [join(sandbox.image.rootfs, PACKAGES_DIR)] : []),
  ];
  const wheels = (await Promise.all(folders.map((dir) => readdir(dir).catch(() => [] as string[])))).flat();
  const held = new Set(wheels.map(wheelName));
  return printed.filter((requirement) => {
    const name = requirementName(requirement);
    return tests.some((text) => text.includes(name)) && !held.has(name);
  });
}

/** The last non-empty line of the first of `texts` that has one. */
export function lastLine(...texts: string[]): string | undefined {
  for (const text of texts) {
    const line = text
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l.length > 0)
      .pop();
    if (line) return line;
  }
  return undefined;
}

/** The last line the tests printed (stderr first): usually what was missing. */
export function lastWords(stderr: string, stdout: string): string {
  const line = lastLine(stderr, stdout);
  return line ? `: ${line.slice(0, 300)}` : "";
}

/** Gives `dirs` and all they hold to `account` (a scratch folder a user other than root writes). */
export async function chownTree(dirs: string[], account: { uid: number; gid: number }): Promise<void> {
  for (const dir of dirs) {
    await lchown(dir, account.uid, account.gid);
    for (const entry of await readdir(dir, { recursive: true }))
      await lchown(join(dir, entry), account.uid, account.gid);
  }
}
