import { dockerfileInstructions, WORKSPACE } from "@bridle/sandbox";
import { parse as parseYaml } from "yaml";
import { readTb1Compose, type TaskService } from "./compose.ts";
import { type TaskDockerfile, workspaceFromDockerfile } from "./dockerfile.ts";
import type { TreeFile } from "./files.ts";
import { OFFLINE } from "./offline.ts";

/**
 * Terminal-Bench 1's task layout, read as it is: `task.yaml` (the instruction and metadata),
 * `run-tests.sh` and `tests/` (the verifier), `solution.sh` or `solution.yaml` (the reference
 * solution), and the task's other files. Bridle runs it as a Harbor task without changing a file
 * of the folder: the instruction and settings become a `task.toml` of Bridle's own, and the
 * verifier is the task's `run-tests.sh`, scored from its pytest summary the way Terminal-Bench's
 * pytest parser scores it.
 */

/** Files of the layout that are not part of the agent's workspace. */
const TASK_FILES = new Set([
  "task.yaml",
  "run-tests.sh",
  "solution.sh",
  "solution.yaml",
  "Dockerfile",
  "docker-compose.yaml",
  "docker-compose.yml",
  ".dockerignore",
]);

/** Terminal-Bench 1's defaults when task.yaml leaves them out. */
const DEFAULT_AGENT_TIMEOUT_SEC = 180;
const DEFAULT_TEST_TIMEOUT_SEC = 30;

/** task.yaml keys that Bridle reads. */
const READ_KEYS = new Set([
  "instruction",
  "descriptions",
  "category",
  "difficulty",
  "tags",
  "author_name",
  "author_email",
  "max_agent_timeout_sec",
  "max_test_timeout_sec",
  "parser_name",
]);

/**
 * Output lines that say the environment failed rather than the tests (an awk pattern): a command or
 * pytest missing, the network out of reach (what the controls also look for), a package index or
 * a Python uv cannot have offline.
 */
const ENVIRONMENT_FAILING = [
  "command not found",
  "No module named .?pytest",
  OFFLINE.source.replaceAll("(?:", "("),
  "No matching distribution found",
  "Could not find a version that satisfies",
  "error: Failed to fetch",
  "No interpreter found",
  // uv offline: "Because uv-build was not found in the cache and you require ...".
  "was not found in the cache",
].join("|");

/**
 * The verifier Bridle writes for a Terminal-Bench 1 task (`tests/test.sh` of the converted task):
 * runs the task's own `run-tests.sh` as Terminal-Bench does (from the workspace, with TEST_DIR set
 * to the tests' folder) and scores the "short test summary info" section of pytest's `-rA` output:
 * 1 when every listed test passed (xfailed and skipped count as passed, as in Terminal-Bench),
 * else 0. Output without a summary is scored 0, as Terminal-Bench scores output its parser cannot
 * read (a parse error is not resolved): the agent's code that does not build ends there. Unless the
 * output shows the environment failing (a command or pytest missing, the network or a package
 * index out of reach): then the tests never ran, so there is no reward, an environment failure.
 * Its reason is the last such line: an early one (the curl of uv's installer, which the toolchain
 * stands in for) is often harmless, and the last is nearest to what stopped the tests.
 */
export const tb1TestSh = (testMounts: string[] = []) => `#!/bin/bash
# Written by Bridle for a Terminal-Bench 1 task: runs the task's run-tests.sh and scores the
# pytest summary it prints (1 when every listed test passed, else 0; no summary is a 0, as in
# Terminal-Bench, unless the environment failed).
export TEST_DIR=/tests
mkdir -p /logs/verifier
${testMounts.map((target) => `# The task's compose file mounts its tests here too.\nmkdir -p '${target}' && cp -a /tests/. '${target}/'\n`).join("")}bash /tests/run-tests.sh 2>&1 | tee /logs/verifier/test-output.txt
awk '
  /short test summary info/ { summary = 1; next }
  summary && $1 ~ /^(PASSED|XFAIL|SKIPPED)$/ { passed++ }
  summary && $1 ~ /^(FAILED|XPASS|ERROR)$/ { failed++ }
  /${ENVIRONMENT_FAILING}/ {
    trouble = substr($0, 1, 200)
  }
  END {
    if (passed + failed > 0) {
      print (failed == 0 ? 1 : 0) > "/logs/verifier/reward.txt"
    } else if (trouble != "") {
      print "bridle: run-tests.sh printed no pytest summary, and its output shows the environment failing: " trouble > "/dev/stderr"
      exit 3
    } else {
      print "bridle: run-tests.sh printed no pytest summary (short test summary info, from pytest -rA): scored 0, as Terminal-Bench scores output its parser cannot read" > "/dev/stderr"
      print 0 > "/logs/verifier/reward.txt"
    }
  }
' /logs/verifier/test-output.txt
`;

/** What Terminal-Bench runs when a task has no run-tests.sh: pytest over tests/test_outputs.py. */
const DEFAULT_RUN_TESTS = `#!/bin/bash
# Written by Bridle: Terminal-Bench 1's default for a task without run-tests.sh.
if command -v pytest >/dev/null; then pytest "$TEST_DIR/test_outputs.py" -rA
else python3 -m pytest "$TEST_DIR/test_outputs.py" -rA; fi
`;

export type Tb1Result =
  | {
      ok: true;
      instruction: string;
      /** A task.toml with the task's settings, parsed like any other. */
      tomlText: string;
      notes: string[];
      environment: TreeFile[];
      workdir: string;
      tests: TreeFile[];
      solution: TreeFile[];
      dockerfile: TaskDockerfile | undefined;
      /** The compose file's services beside the task's container. */
      services: TaskService[];
    }
  | { ok: false; problems: string[] };

const text = (content: string): Buffer => Buffer.from(content, "utf8");
const file = (path: string, content: string, mode = 0o755): TreeFile => ({
  path,
  mode,
  content: text(content),
});

/** Reads a Terminal-Bench 1 task folder's files as the parts of a Harbor task. */
export function readTb1(files: TreeFile[]): Tb1Result {
  const problems: string[] = [];
  const notes: string[] = [];
  const byPath = (path: string) => files.find((f) => f.path === path);
  let yaml: Record<string, unknown> = {};
  try {
    const parsed: unknown = parseYaml(byPath("task.yaml")?.content.toString("utf8") ?? "");
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
      problems.push("task.yaml: not a mapping of keys to values");
    else yaml = parsed as Record<string, unknown>;
  } catch (err) {
    const e = err as Error & { linePos?: { line: number; col: number }[] };
    const at = e.linePos?.[0] ? `line ${e.linePos[0].line}, column ${e.linePos[0].col}: ` : "";
    return { ok: false, problems: [`task.yaml: ${at}${e.message.split("\n")[0]}`] };
  }

  const instruction = instructionOf(yaml);
  if (instruction === undefined)
    problems.push("task.yaml: instruction: missing (or descriptions with a `base` entry)");
  else if (instruction.trim() === "") problems.push("task.yaml: instruction: empty");

  const seconds = (key: string, fallback: number): number => {
    const value = yaml[key];
    if (value === undefined || value === null) return fallback;
    if (typeof value !== "number" || !(value > 0) || value > 24 * 3600) {
      problems.push(`task.yaml: ${key}: a number of seconds from 0 to 86400, got ${JSON.stringify(value)}`);
      return fallback;
    }
    return value;
  };
  const agentTimeout = seconds("max_agent_timeout_sec", DEFAULT_AGENT_TIMEOUT_SEC);
  const testTimeout = seconds("max_test_timeout_sec", DEFAULT_TEST_TIMEOUT_SEC);
  const parser = yaml.parser_name ?? "pytest";
  if (parser !== "pytest")
    problems.push(
      `task.yaml: parser_name: ${JSON.stringify(parser)} is not read (Bridle scores Terminal-Bench's pytest summary)`,
    );
  const strings = (key: string): string | undefined =>
    typeof yaml[key] === "string" ? (yaml[key] as string) : undefined;
  const tags = Array.isArray(yaml.tags) ? yaml.tags.filter((t): t is string => typeof t === "string") : [];
  const unread = Object.keys(yaml).filter((k) => !READ_KEYS.has(k));
  if (unread.length > 0) notes.push(`task.yaml: kept, not used by Bridle: ${unread.sort().join(", ")}`);

  const solutionSh = byPath("solution.sh");
  const solutionYaml = byPath("solution.yaml");
  let solve: string | undefined;
  if (solutionSh) solve = solutionSh.content.toString("utf8");
  else if (solutionYaml) {
    const read = solutionCommands(solutionYaml.content.toString("utf8"));
    if ("problem" in read) problems.push(`solution.yaml: ${read.problem}`);
    else
      solve = `#!/bin/bash\n# Written by Bridle from solution.yaml's commands, in order.\n${read.commands.join("\n")}\n`;
  } else problems.push("solution.sh: missing, and no solution.yaml (the oracle control runs it)");

  const testFiles = files
    .filter((f) => f.path.startsWith("tests/"))
    .map((f) => ({ ...f, path: f.path.slice("tests/".length) }));
  // Terminal-Bench copies run-tests.sh into /tests and then tests/ over it: a tests/run-tests.sh
  // is the one that runs.
  const shadowing = testFiles.some((f) => f.path === "run-tests.sh");
  const runTests = shadowing ? undefined : byPath("run-tests.sh");
  if (shadowing)
    notes.push(
      byPath("run-tests.sh")
        ? "run-tests.sh: not run: tests/run-tests.sh takes its place in /tests, as Terminal-Bench copies tests/ over it"
        : "tests/run-tests.sh: run as the task's run-tests.sh",
    );
  else if (!runTests) {
    if (!testFiles.some((f) => f.path === "test_outputs.py"))
      problems.push("run-tests.sh: missing, and no tests/test_outputs.py for Terminal-Bench's default");
    else notes.push("run-tests.sh: absent, so pytest runs tests/test_outputs.py (Terminal-Bench's default)");
  }
  if (testFiles.some((f) => f.path === "test.sh"))
    problems.push("tests/test.sh: clashes with the verifier Bridle writes for a Terminal-Bench 1 task");
  const compose = byPath("docker-compose.yaml") ?? byPath("docker-compose.yml");
  const read = compose ? readTb1Compose(compose.content.toString("utf8"), compose.path, files) : undefined;
  if (compose && read && "problem" in read) problems.push(read.problem);
  const composed = read && !("problem" in read) ? read : { testMounts: [], services: [], build: null };
  // The task's container: built from its compose service's build context where that names one
  // (`build: {context: client}`), else from the Dockerfile at the top of the folder.
  const folder = composed.build?.context ?? "";
  const dockerfileName = `${folder ? `${folder}/` : ""}${composed.build?.dockerfile ?? "Dockerfile"}`;
  const dockerfile = byPath(dockerfileName);
  if (composed.build && !dockerfile && compose)
    problems.push(`${compose.path}: the task's container is built from ${dockerfileName}, which is missing`);
  const inFolder = folder
    ? files
        .filter((f) => f.path.startsWith(`${folder}/`))
        .map((f) => ({ ...f, path: f.path.slice(folder.length + 1) }))
    : files;
  // The build context without the task's own files: tests and solutions never reach the agent,
  // unless the task's Dockerfile itself copies them into the image, as some datasets do.
  const copied = dockerfile ? copiedSources(dockerfile.content.toString("utf8")) : [];
  const ownFile = (path: string) => !folder && (TASK_FILES.has(path) || path.startsWith("tests/"));
  // Named by a COPY or ADD (`COPY . /app` names none: a task's own files stay out of it).
  const named = (path: string) =>
    copied.find(({ source }) => source !== "." && (path === source || path.startsWith(`${source}/`)));
  for (const { line, source } of copied)
    if (inFolder.some((f) => ownFile(f.path) && named(f.path)?.source === source))
      notes.push(
        `${dockerfileName}: line ${line}: copies the task's ${source} into the image, where the agent can read it, as in Terminal-Bench`,
      );
  const context = inFolder.filter((f) => !ownFile(f.path) || named(f.path));
  const workspace = dockerfile
    ? workspaceFromDockerfile(dockerfile.content.toString("utf8"), context, dockerfileName)
    : { files: context, notes: [], workdir: WORKSPACE };
  const withoutImage = [
    `${dockerfileName}: not built; its WORKDIR, COPY and ADD lines place the workspace, run in bubblewrap with this host's tools`,
    ...workspace.notes,
  ];
  const testMounts = composed.testMounts;
  if (compose && read && !("problem" in read)) {
    for (const target of testMounts)
      notes.push(
        `${compose.path}: the task's tests are also put at ${target}, where its compose file mounts them, for the tests only (not while the agent works)`,
      );
    for (const service of composed.services)
      notes.push(
        `${compose.path}: service ${service.name} runs beside the task's container, built from ${service.dockerfile.name}, on a network of their own`,
      );
    if (composed.services.length === 0 && !composed.build)
      notes.push(
        `${compose.path}: not read${testMounts.length > 0 ? " otherwise" : ""}: the task's Dockerfile alone makes its environment`,
      );
  }
  if (problems.length > 0 || instruction === undefined) return { ok: false, problems };

  const tomlText = [
    'version = "1.0"',
    "",
    "[metadata]",
    ...["category", "difficulty", "author_name", "author_email"].flatMap((key) => {
      const value = strings(key);
      return value ? [`${key} = ${JSON.stringify(value)}`] : [];
    }),
    ...(tags.length > 0 ? [`tags = ${JSON.stringify(tags)}`] : []),
    "",
    "[agent]",
    `timeout_sec = ${agentTimeout}`,
    "",
    "[verifier]",
    `timeout_sec = ${testTimeout}`,
    "",
  ].join("\n");
  return {
    ok: true,
    instruction,
    tomlText,
    notes,
    environment: workspace.files,
    workdir: workspace.workdir,
    tests: [
      ...testFiles,
      ...(shadowing
        ? []
        : [runTests ? { ...runTests, path: "run-tests.sh" } : file("run-tests.sh", DEFAULT_RUN_TESTS)]),
      file("test.sh", tb1TestSh(testMounts)),
    ],
    solution: [file("solve.sh", solve ?? "")],
    dockerfile: dockerfile
      ? { name: dockerfileName, content: dockerfile.content.toString("utf8"), context, withoutImage }
      : undefined,
    services: composed.services,
  };
}

/** The sources of the Dockerfile's COPY and ADD lines (from the build context), normalised. */
function copiedSources(dockerfile: string): { line: number; source: string }[] {
  return dockerfileInstructions(dockerfile).flatMap(({ line, text }) => {
    const words = text.split(/\s+/);
    if (!/^(COPY|ADD)$/i.test(words[0] ?? "") || words.some((w) => w.startsWith("--from"))) return [];
    return words
      .slice(1, -1)
      .filter((w) => !w.startsWith("--"))
      .map((w) => ({
        line,
        source: w.replace(/^"|"$/g, "").replace(/^\.\//, "").replace(/\/+$/, "") || ".",
      }));
  });
}

/** task.yaml's instruction: `instruction`, or the `base` entry of the older `descriptions` list. */
function instructionOf(yaml: Record<string, unknown>): string | undefined {
  if (typeof yaml.instruction === "string") return yaml.instruction;
  if (Array.isArray(yaml.descriptions)) {
    const base = yaml.descriptions.find(
      (d): d is { key: string; description: string } =>
        typeof d === "object" && d !== null && (d as { key?: unknown }).key === "base",
    );
    if (typeof base?.description === "string") return base.description;
  }
  return undefined;
}

/** solution.yaml: a list of `{command: ...}` entries, run in order by the oracle. */
function solutionCommands(source: string): { commands: string[] } | { problem: string } {
  let parsed: unknown;
  try {
    parsed = parseYaml(source);
  } catch (err) {
    return { problem: (err as Error).message.split("\n")[0] ?? "not valid YAML" };
  }
  if (!Array.isArray(parsed)) return { problem: "a list of entries with a `command` each" };
  const commands: string[] = [];
  for (const [i, entry] of parsed.entries()) {
    const command = (entry as { command?: unknown } | null)?.command;
    if (typeof command !== "string") return { problem: `entry ${i + 1}: no \`command\` string` };
    commands.push(command);
  }
  return { commands };
}
