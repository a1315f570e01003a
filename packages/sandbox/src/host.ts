import { accessSync, constants, existsSync, lstatSync, readlinkSync } from "node:fs";
import { join } from "node:path";

/** The PATH inside every sandbox: system folders only, never a user's or a project's. */
export const SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** Host folders the sandbox sees, read-only: the system, not the users' data. */
export const SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"];

/**
 * bwrap arguments that show the host system read-only. Merged-/usr links (`/bin -> usr/bin`) are
 * recreated as links. /home, /root, /opt, /srv, /tmp, /var and any data folder are not shown, so no task
 * folder, test or solution anywhere on the host is visible from inside.
 */
export function systemMountArgs(): string[] {
  const args: string[] = [];
  for (const dir of SYSTEM_DIRS) {
    if (!existsSync(dir)) continue;
    const stat = lstatSync(dir);
    if (stat.isSymbolicLink()) args.push("--symlink", readlinkSync(dir), dir);
    else if (stat.isDirectory()) args.push("--ro-bind", dir, dir);
  }
  return args;
}

/** Which of `tools` are not executable anywhere on the sandbox's PATH. */
export function missingTools(tools: readonly string[]): string[] {
  return tools.filter(
    (tool) =>
      !SANDBOX_PATH.split(":").some((dir) => {
        try {
          accessSync(join(dir, tool), constants.X_OK);
          return true;
        } catch {
          return false;
        }
      }),
  );
}
