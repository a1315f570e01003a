import type { ControlResults, TaskVerdict } from "@bridle/contracts";
import type { EnvironmentImages } from "@bridle/sandbox";
import { mapBounded } from "@bridle/service-kit";
import { controlProblems, runControls } from "./controls.ts";
import { taskImage } from "./image.ts";
import { labelsFromControls } from "./labels.ts";
import { findTaskDirs, folderTaskId, type HarborTask, loadTask } from "./load.ts";

export interface ValidateOptions {
  /** Task folders checked at once (each runs two sandboxes in turn). */
  parallel?: number;
  /** Schema only, when false. */
  controls?: boolean;
  baseDir?: string;
  /** Variables of the user's environment that tasks' `${VAR}` references may read. */
  allowedEnv?: readonly string[];
  /** Runs of each control (2 by default); differing rewards flag the verifier as flaky. */
  repeats?: number;
  /** The verifier toolchain on the host (see TestRunOptions.toolchain). */
  toolchain?: string | undefined;
  /** Builds tasks' Dockerfiles; without it (or an engine) they run in bubblewrap on the host's tools. */
  images?: EnvironmentImages | undefined;
  /**
   * Controls already passed by this very content (same hash, at least as many repeats), reused
   * instead of running again: an unchanged task need not be checked twice.
   */
  passedBefore?: (task: HarborTask) => ControlResults | null | undefined;
  /** Called as each task's verdict is known, in completion order. */
  onVerdict?: (verdict: TaskVerdict, task: HarborTask | null) => void | Promise<void>;
}

/** The verdict on a folder refused before its controls: what is wrong with it, nothing else. */
function refused(id: string, dir: string, problems: string[]): TaskVerdict {
  return {
    id,
    dir,
    ok: false,
    problems,
    notes: [],
    imported: false,
    controls: null,
    controlsReused: false,
    labels: null,
    image: null,
    services: [],
  };
}

/** Validates one task folder: schema, then (optionally) the controls. Never throws for a bad task. */
export async function validateTask(
  dir: string,
  options: Omit<ValidateOptions, "parallel" | "onVerdict"> = {},
): Promise<{ verdict: TaskVerdict; task: HarborTask | null }> {
  const loaded = await loadTask(dir);
  if (!loaded.ok) {
    return { verdict: refused(loaded.id, dir, loaded.problems), task: null };
  }
  const { task } = loaded;
  // The Dockerfile is built only when the controls run (a schema check stays fast): its image is
  // what they, and later the rollouts, run on.
  const built =
    options.controls !== false
      ? await taskImage(task, options.images, { toolchain: options.toolchain })
      : null;
  if (built) task.notes = [...task.notes, ...built.notes];
  else if (task.dockerfile)
    task.notes = [...task.notes, `${task.dockerfile.name}: built when the controls run`];
  const image = built?.image ? { digest: built.image.digest, tag: built.image.tag } : null;
  // The services as the controls start them, and as the registry keeps them (their images by digest).
  const started = (built?.services ?? []).map(({ service: { dockerfile: _, ...settings }, image }) => ({
    ...settings,
    image,
  }));
  const services = started.map(({ image, ...settings }) => ({
    ...settings,
    image: { digest: image.digest, tag: image.tag },
  }));
  if (built?.problem) {
    return {
      verdict: {
        id: task.id,
        dir,
        ok: false,
        problems: [built.problem],
        notes: task.notes,
        imported: false,
        controls: null,
        controlsReused: false,
        labels: task.labels,
        image: null,
        services: [],
      },
      task: null,
    };
  }
  let controls: ControlResults | null = null;
  let controlsReused = false;
  const repeats = options.repeats ?? 2;
  const before = options.controls !== false ? options.passedBefore?.(task) : undefined;
  if (before?.passed && before.hash === task.hash && before.repeats >= repeats) {
    controls = before;
    controlsReused = true;
  } else if (options.controls !== false) {
    try {
      controls = await runControls(task, {
        repeats,
        toolchain: options.toolchain,
        image: built?.image ?? null,
        services: started,
        ...(options.baseDir ? { baseDir: options.baseDir } : {}),
        ...(options.allowedEnv ? { allowedEnv: options.allowedEnv } : {}),
      });
    } catch (err) {
      const message = `controls could not run: ${(err as Error).message}`;
      return {
        verdict: {
          id: task.id,
          dir,
          ok: false,
          problems: [message],
          notes: task.notes,
          imported: false,
          controls: null,
          controlsReused: false,
          labels: task.labels,
          image,
          services,
        },
        task,
      };
    }
  }
  const problems = controls ? controlProblems(controls) : [];
  return {
    verdict: {
      id: task.id,
      dir,
      ok: problems.length === 0,
      problems,
      notes: task.notes,
      imported: false,
      controls,
      controlsReused,
      labels: controls ? labelsFromControls(controls) : task.labels,
      image,
      services,
    },
    task,
  };
}

/**
 * Validates a task folder or every task folder below it; a malformed task is reported, never fatal.
 * A task's id is its folder's name, so a second folder of the same name (another dataset's) is
 * refused, naming the first.
 */
export async function validateFolder(path: string, options: ValidateOptions = {}): Promise<TaskVerdict[]> {
  const dirs = await findTaskDirs(path);
  const firstOf = new Map<string, string>();
  return mapBounded(dirs, options.parallel ?? 2, async (dir) => {
    const id = folderTaskId(dir);
    const first = firstOf.get(id);
    if (first === undefined) firstOf.set(id, dir);
    else {
      const problem = `${id}: the task id is already taken by ${first} (ids are made of folder names)`;
      const verdict = refused(id, dir, [problem]);
      await options.onVerdict?.(verdict, null);
      return verdict;
    }
    const { verdict, task } = await validateTask(dir, options);
    await options.onVerdict?.(verdict, task);
    return verdict;
  });
}
