import { readdirSync, readFileSync } from "node:fs";

/** Host processes whose command line contains `marker` (for tests that a sandbox leaves none). */
export function hostProcessesWith(marker: string): number[] {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(marker);
      } catch {
        return false;
      }
    })
    .map(Number);
}
