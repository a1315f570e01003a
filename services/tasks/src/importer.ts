import type { TaskVerdict } from "@bridle/contracts";
import { type SandboxHost, splitFor, validateFolder } from "@bridle/harbor";
import type { Logger } from "@bridle/service-kit";
import type { TaskStore } from "./store.ts";

export interface ImportOptions extends SandboxHost {
  store: TaskStore;
  log: Logger;
  heldOutRatio: number;
  parallel: number;
  runControls: boolean;
  /** Runs of each control; a task whose content already passed as many is not checked again. */
  controlRepeats?: number;
}

/**
 * Imports a task folder or a folder of them. Malformed tasks are reported and skipped; tasks that
 * fail a control are imported with the failure recorded, so sampling can leave them out.
 */
export async function importTasks(path: string, options: ImportOptions): Promise<TaskVerdict[]> {
  return validateFolder(path, {
    parallel: options.parallel,
    controls: options.runControls,
    repeats: options.controlRepeats ?? 2,
    passedBefore: (task) => options.store.get(task.id)?.controls,
    ...(options.sandboxDir ? { baseDir: options.sandboxDir } : {}),
    ...(options.allowedEnv ? { allowedEnv: options.allowedEnv } : {}),
    toolchain: options.toolchain,
    images: options.images,
    onVerdict: (verdict, task) => {
      if (!task) {
        options.log.warn({ task: verdict.id, problems: verdict.problems }, "task skipped");
        return;
      }
      const split = splitFor(task.id, options.heldOutRatio, task.splitOverride);
      options.store.upsert(
        task,
        { split, source: task.splitOverride ? "metadata" : "hash" },
        verdict.controls,
        verdict.image,
        verdict.services,
      );
      verdict.imported = true;
      verdict.labels = task.labels;
      options.log.info({ task: task.id, hash: task.hash, split, ok: verdict.ok }, "task imported");
    },
  });
}
