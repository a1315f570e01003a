import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The checkout's root: where `infra/`, `tasks/` and the default install folder `.bridle/` live. */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
