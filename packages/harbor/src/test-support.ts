import { join } from "node:path";
import { EnvironmentImages } from "@bridle/sandbox";
import { repoRoot } from "@bridle/service-kit";

/** The install folder (`./bridle test` runs the install first). */
const installHome = process.env.BRIDLE_HOME ?? join(repoRoot, ".bridle");

/** The verifier toolchain the install made. */
export const toolchain = join(installHome, "toolchain");

/** Task images in the install folder: the base built from Debian's packages is made once per machine. */
export const installImages = () => new EnvironmentImages({ home: join(installHome, "containers") });
