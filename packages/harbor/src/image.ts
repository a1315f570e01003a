import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BuiltImage, type EnvironmentImages, ImageBuildError } from "@bridle/sandbox";
import { writeTree } from "./files.ts";
import type { HarborTask } from "./load.ts";

/** A task's image as far as this host can make it: the image, what to say about it, or why it is refused. */
export interface TaskImage {
  /** The built image; null for a task without a Dockerfile or a host without an image engine. */
  image: BuiltImage | null;
  notes: string[];
  /** Why the task is refused: its Dockerfile does not build (the line named where one is to blame). */
  problem?: string;
}

/**
 * Builds a task's Dockerfile (cached by digest) where `images` can, so its sandboxes run on the
 * image; elsewhere the task runs in bubblewrap on the host's tools, and the notes say what that
 * leaves out.
 */
export async function taskImage(task: HarborTask, images: EnvironmentImages | undefined): Promise<TaskImage> {
  const dockerfile = task.dockerfile;
  if (!dockerfile) return { image: null, notes: [] };
  const why = images ? await images.unavailable() : "no image engine is configured";
  if (!images || why) {
    const [first = "", ...rest] = dockerfile.withoutImage;
    return { image: null, notes: [first.replace("not built;", `not built (${why});`), ...rest] };
  }
  const context = await mkdtemp(join(tmpdir(), "bridle-build-context-"));
  try {
    await writeTree(context, dockerfile.context);
    const image = await images.build(dockerfile.content, context, dockerfile.name);
    return {
      image,
      notes: [
        `${dockerfile.name}: built (${image.tag}${image.buildSeconds > 0 ? `, ${image.buildSeconds} s` : ", cached"}); the agent and the tests run on its system`,
        ...image.substitutions,
      ],
    };
  } catch (err) {
    if (err instanceof ImageBuildError) return { image: null, notes: [], problem: err.message };
    throw err;
  } finally {
    await rm(context, { recursive: true, force: true });
  }
}
