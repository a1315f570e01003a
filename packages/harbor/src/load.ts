import { existsSync, statSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { basename, join, resolve } from "node:path";
import {
  categoryName,
  type EvaluationLabels,
  type MinReward,
  type StepRewardStrategy,
  type TaskCategory,
  TaskId,
  type TaskSplit,
} from "@bridle/contracts";
import { missingTools, WORKSPACE } from "@bridle/sandbox";
import { composeSideServices, type TaskService } from "./compose.ts";
import { type TaskDockerfile, workspaceFromDockerfile } from "./dockerfile.ts";
import { hashTree, readTree, type TreeFile } from "./files.ts";
import { labelsOf, parseTaskToml, phaseEnv, type TaskToml } from "./task-toml.ts";
import { readTb1 } from "./tb1.ts";

/** A Harbor task folder that passed schema validation. */
export interface HarborTask {
  id: string;
  dir: string;
  /** The folder's layout: Harbor's (task.toml), or Terminal-Bench 1's (task.yaml), read as it is. */
  format: "harbor" | "terminal-bench-1";
  hash: string;
  category: TaskCategory;
  splitOverride: TaskSplit | undefined;
  instruction: string;
  toml: TaskToml;
  /** What a reader should know that is no reason to refuse the task (unknown keys, a free category). */
  notes: string[];
  labels: EvaluationLabels | null;
  files: TreeFile[];
  /** Files under environment/, relative to it: the workspace's starting content. */
  environment: TreeFile[];
  /** Where the workspace is shown and the agent and the tests start (task.toml, WORKDIR, or /app). */
  workdir: string;
  /** Files under tests/, relative to it. */
  tests: TreeFile[];
  /** Files under solution/, relative to it; empty when the task has no reference solution. */
  solution: TreeFile[];
  /** The task's Dockerfile: built into the sandbox's system where an image engine is installed. */
  dockerfile: TaskDockerfile | undefined;
  /** Services beside the task's container (its compose file's others), each built from a Dockerfile of its own. */
  services: TaskService[];
  /** A multi-step task's steps (`[[steps]]`), in order; empty for a single-step task. */
  steps: HarborStep[];
  /** How the steps' rewards roll up into the task's (task.toml `multi_step_reward_strategy`). */
  stepRewards: StepRewardStrategy;
}

/**
 * One step of a multi-step task, from `[[steps]]` and `steps/<name>/`: run in order in one sandbox,
 * each with its own instruction, then its own tests.
 */
export interface HarborStep {
  name: string;
  instruction: string;
  /** The task's shared tests/ with steps/<name>/tests/ over them (a same-named file is the step's). */
  tests: TreeFile[];
  /** steps/<name>/solution/: the oracle control runs its solve.sh; empty when the step has none. */
  solution: TreeFile[];
  /** steps/<name>/workdir/: copied into the workspace before the step; its setup.sh runs then. */
  workdir: TreeFile[];
  /** The step's reward must reach these (per key) for the next step to run. */
  minReward: MinReward | null;
  agentTimeoutSec: number;
  verifierTimeoutSec: number;
  verifierEnv: Record<string, string>;
}

export type LoadResult =
  | { ok: true; task: HarborTask }
  | { ok: false; id: string; dir: string; problems: string[] };

/**
 * Files that describe the task's container build, not its workspace. Harbor reads the compose file
 * by the name `docker-compose.yaml` alone: a `docker-compose.yml` is one of the task's own files (a
 * task about fixing one copies it into its image).
 */
const BUILD_FILES = new Set(["Dockerfile", "docker-compose.yaml", ".dockerignore"]);

const under = (files: TreeFile[], folder: string) =>
  files
    .filter((f) => f.path.startsWith(`${folder}/`))
    .map((f) => ({ ...f, path: f.path.slice(folder.length + 1) }));

/**
 * A task's id, from its folder's name as datasets and clones write them (`R_package_dependency`,
 * `Owner+name`, `Task 1`): lower case, each run of other characters than letters, digits, '.', '_'
 * and '-' one '-', nothing but a letter or digit first. Empty when the name has no letter or digit.
 */
export function taskIdOf(folderName: string): string {
  return folderName
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, "-")
    .replace(/^[^a-z0-9]+/, "")
    .slice(0, 128)
    .replace(/-+$/, "");
}

/** The id of the task in folder `dir` (its name as it is, where that makes none: loadTask refuses it). */
export const folderTaskId = (dir: string) => taskIdOf(basename(dir)) || basename(dir);

/** Loads and checks one task folder; every problem names its file and field. */
export async function loadTask(dirPath: string): Promise<LoadResult> {
  const dir = resolve(dirPath);
  const folder = basename(dir);
  const id = folderTaskId(dir);
  const problems: string[] = [];
  const idCheck = TaskId.safeParse(id);
  if (!idCheck.success)
    problems.push(`${folder}: the folder's name has no letter or digit to make the task's id of`);
  const idNote = id === folder ? [] : [`task id ${id}: from the folder's name ${JSON.stringify(folder)}`];

  let files: TreeFile[];
  try {
    files = await readTree(dir);
  } catch (err) {
    return { ok: false, id, dir, problems: [...problems, (err as Error).message] };
  }
  const file = (path: string) => files.find((f) => f.path === path);
  if (!file("task.toml") && file("task.yaml")) return loadTb1(id, dir, files, problems, idNote);

  let toml: TaskToml | undefined;
  const notes = [...idNote];
  const tomlFile = file("task.toml");
  if (!tomlFile) problems.push("task.toml: missing");
  else {
    const parsed = parseTaskToml(tomlFile.content.toString("utf8"));
    if (parsed.ok) {
      toml = parsed.toml;
      notes.push(...parsed.notes);
    } else problems.push(...parsed.problems);
  }
  const steps = toml?.steps ? readSteps(toml, files, problems) : [];
  let instruction = file("instruction.md")?.content.toString("utf8") ?? "";
  if (toml?.steps) {
    // A multi-step task's root instruction.md is optional and never the agent's: the steps' are,
    // and together they are what the task asks (the guard's rules read it; listings show it).
    instruction = steps.map((s, i) => `Step ${i + 1} (${s.name}):\n${s.instruction.trim()}`).join("\n\n");
  } else {
    if (!file("instruction.md")) problems.push("instruction.md: missing");
    else if (instruction.trim() === "") problems.push("instruction.md: empty");
    if (!file("tests/test.sh")) problems.push("tests/test.sh: missing (the verifier runs it)");
    // Many public task sets (TermiGen's thousands of environments) ship no solutions: such a task
    // loads, and its oracle control says that nothing proves it solvable (see controls.ts).
    if (!file("solution/solve.sh"))
      notes.push(
        "solution/solve.sh: absent: no reference solution, so the oracle control cannot show the task is solvable",
      );
  }
  if (toml) {
    const missing = missingTools(toml.environment.requires);
    if (missing.length > 0) {
      problems.push(`task.toml: environment.requires: not installed on this host: ${missing.join(", ")}`);
    }
  }
  // Harbor merges the task's compose file over its own, whose `main` is the task's container.
  const services: TaskService[] = [];
  const name = "environment/docker-compose.yaml";
  const compose = file(name);
  if (compose) {
    const read = composeSideServices(compose.content.toString("utf8"), name, "main", files, "environment");
    if ("problem" in read) problems.push(read.problem);
    else services.push(...read.services);
    for (const service of "services" in read ? read.services : [])
      notes.push(
        `${name}: service ${service.name} runs beside the task's container, built from ${service.dockerfile.name}, on a network of their own`,
      );
  }
  if (problems.length > 0 || !toml) return { ok: false, id, dir, problems };
  const context = under(files, "environment").filter((f) => !BUILD_FILES.has(f.path));
  // Harbor's prebuilt image: no registry is reachable to pull it, so it is built here as a
  // Dockerfile of its one FROM line where the task has no Dockerfile of its own.
  const prebuilt = toml.environment.docker_image;
  const own = file("environment/Dockerfile");
  if (own && prebuilt)
    notes.push(
      `task.toml: environment.docker_image ${prebuilt}: no image registry is reachable to pull it; environment/Dockerfile is built instead`,
    );
  const dockerfile =
    own ??
    (prebuilt
      ? { path: "environment.docker_image", mode: 0o644, content: Buffer.from(`FROM ${prebuilt}\n`) }
      : undefined);
  const dockerfileName = own ? "environment/Dockerfile" : "task.toml: environment.docker_image";
  const workspace = dockerfile
    ? workspaceFromDockerfile(
        dockerfile.content.toString("utf8"),
        context,
        dockerfileName,
        toml.environment.workdir,
      )
    : { files: context, notes: [], workdir: toml.environment.workdir ?? WORKSPACE };
  if (workspace.workdir !== WORKSPACE)
    notes.push(
      `workdir ${workspace.workdir}: the workspace is shown there, and the agent and the tests start there`,
    );
  return {
    ok: true,
    task: {
      id,
      dir,
      format: "harbor",
      hash: hashTree(files),
      category: categoryName(toml.metadata.category),
      splitOverride: toml.metadata.split,
      instruction,
      toml,
      notes,
      labels: labelsOf(toml),
      files,
      environment: workspace.files,
      workdir: workspace.workdir,
      tests: under(files, "tests"),
      solution: under(files, "solution"),
      steps,
      stepRewards: toml.multi_step_reward_strategy,
      services,
      dockerfile: dockerfile
        ? {
            name: dockerfileName,
            content: dockerfile.content.toString("utf8"),
            // The whole folder, as an engine is given it: a Dockerfile may COPY its .dockerignore,
            // and the engine honours that file.
            context: under(files, "environment"),
            withoutImage: [
              `${dockerfileName}: not built; its WORKDIR, COPY and ADD lines place the workspace, run in bubblewrap with this host's tools`,
              ...workspace.notes,
            ],
          }
        : undefined,
    },
  };
}

/**
 * The `[[steps]]` of a task.toml with their folders: each step needs steps/<name>/instruction.md,
 * and a tests/test.sh of its own or the task's shared one. Problems are added to `problems`.
 */
function readSteps(toml: TaskToml, files: TreeFile[], problems: string[]): HarborStep[] {
  const shared = under(files, "tests");
  return (toml.steps ?? []).map((step) => {
    const folder = `steps/${step.name}`;
    const own = under(files, folder);
    const instruction = own.find((f) => f.path === "instruction.md")?.content.toString("utf8") ?? "";
    if (!own.some((f) => f.path === "instruction.md")) problems.push(`${folder}/instruction.md: missing`);
    else if (instruction.trim() === "") problems.push(`${folder}/instruction.md: empty`);
    const ownTests = under(own, "tests");
    const tests = [...shared.filter((f) => !ownTests.some((o) => o.path === f.path)), ...ownTests];
    if (!tests.some((f) => f.path === "test.sh"))
      problems.push(
        `${folder}/tests/test.sh: missing, and the task has no shared tests/test.sh (the verifier runs it)`,
      );
    const minReward =
      step.min_reward === undefined
        ? null
        : typeof step.min_reward === "number"
          ? { reward: step.min_reward }
          : step.min_reward;
    return {
      name: step.name,
      instruction,
      tests,
      solution: under(own, "solution"),
      workdir: under(own, "workdir"),
      minReward,
      agentTimeoutSec: step.agent?.timeout_sec ?? toml.agent.timeout_sec,
      verifierTimeoutSec: step.verifier?.timeout_sec ?? toml.verifier.timeout_sec,
      verifierEnv: phaseEnv(toml, step).verifier,
    };
  });
}

/**
 * A Terminal-Bench 1 folder (task.yaml, no task.toml): its parts read as a Harbor task's, with a
 * task.toml and a verifier of Bridle's own (see tb1.ts); the folder itself is left as it is.
 */
function loadTb1(
  id: string,
  dir: string,
  files: TreeFile[],
  idProblems: string[],
  idNote: string[],
): LoadResult {
  const read = readTb1(files);
  if (!read.ok) return { ok: false, id, dir, problems: [...idProblems, ...read.problems] };
  const parsed = parseTaskToml(read.tomlText);
  const problems = [...idProblems, ...(parsed.ok ? [] : parsed.problems)];
  if (problems.length > 0 || !parsed.ok) return { ok: false, id, dir, problems };
  const { toml } = parsed;
  return {
    ok: true,
    task: {
      id,
      dir,
      format: "terminal-bench-1",
      hash: hashTree(files),
      category: categoryName(toml.metadata.category),
      splitOverride: undefined,
      instruction: read.instruction,
      toml,
      // The settings came from task.yaml: say so in what is noted about them.
      notes: [
        ...idNote,
        ...read.notes,
        ...parsed.notes.map((n) => n.replace(/^task\.toml: metadata\./, "task.yaml: ")),
      ],
      labels: null,
      files,
      environment: read.environment,
      workdir: read.workdir,
      tests: read.tests,
      solution: read.solution,
      steps: [],
      stepRewards: "mean",
      dockerfile: read.dockerfile,
      services: read.services,
    },
  };
}

const looksLikeTask = (dir: string) =>
  ["task.toml", "task.yaml", "instruction.md", "tests"].some((name) => existsSync(join(dir, name)));

/** How deep below the named folder task folders are looked for (a dataset's `tasks/<org>/<task>`). */
const MAX_DEPTH = 6;

/**
 * The task folders at `path`: the folder itself if it is a task, else every task folder below it,
 * at any depth up to six (a dataset nests them), sorted. A task folder is not searched further;
 * hidden folders and `node_modules` are skipped.
 */
export async function findTaskDirs(path: string): Promise<string[]> {
  const dir = resolve(path);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new Error(`${path}: not a folder`);
  const found: string[] = [];
  const walk = async (folder: string, depth: number): Promise<void> => {
    if (looksLikeTask(folder)) {
      found.push(folder);
      return;
    }
    if (depth >= MAX_DEPTH) return;
    const entries = await readdir(folder, { withFileTypes: true });
    for (const e of entries) {
      if (e.isDirectory() && !e.name.startsWith(".") && e.name !== "node_modules")
        await walk(join(folder, e.name), depth + 1);
    }
  };
  await walk(dir, 0);
  return found.sort();
}

/** Reads a file of a loaded task's folder as text (for tools that need the raw `task.toml`). */
export const readTaskFile = (task: HarborTask, path: string) => readFile(join(task.dir, path), "utf8");
