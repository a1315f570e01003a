import { randomBytes } from "node:crypto";
import { mkdir, readdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { processAlive } from "./cgroup.ts";

/**
 * Leases on an unpacked image: a live sandbox on it holds one, so the cache's bound never removes
 * an image from under a run (see `EnvironmentImages.trim`). A lease is a file named for the
 * process that holds it; a lease whose process is gone (killed before it let go) holds nothing.
 */

/** The folder of an image's leases, beside its root filesystem. */
export const LEASES = "leases";

/** Takes a lease in `dir`; the function returned lets go of it. */
export async function takeLease(dir: string): Promise<() => Promise<void>> {
  await mkdir(dir, { recursive: true });
  const file = join(dir, `${process.pid}-${randomBytes(6).toString("hex")}`);
  await writeFile(file, "");
  return () => rm(file, { force: true });
}

/** Whether a live process holds a lease in `dir`; the leases of processes that are gone are removed. */
export async function leased(dir: string): Promise<boolean> {
  let held = false;
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    const pid = Number(name.split("-")[0]);
    if (Number.isInteger(pid) && pid > 0 && processAlive(pid)) held = true;
    else await rm(join(dir, name), { force: true });
  }
  return held;
}
