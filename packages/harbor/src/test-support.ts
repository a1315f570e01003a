import { existsSync } from "node:fs";
import { join } from "node:path";
import { EnvironmentImages } from "@bridle/sandbox";
import { repoRoot } from "@bridle/service-kit";

/** The install folder (`./bridle test` runs the install first). */
const installHome = process.env.BRIDLE_HOME ?? join(repoRoot, ".bridle");

/** The verifier toolchain the install made. */
export const toolchain = join(installHome, "toolchain");

/** Task images in the install folder: the base built from Debian's packages is made once per machine. */
export const installImages = () => new EnvironmentImages({ home: join(installHome, "containers") });

/** The install's task images, where podman can build them here; the reason why not fails the test. */
export async function buildableImages(): Promise<EnvironmentImages> {
  const images = installImages();
  const why = await images.unavailable();
  if (why) throw new Error(`images cannot be built here: ${why}`);
  return images;
}

/** Fails the test where the install made no verifier toolchain. */
export function requireToolchain(): void {
  if (!existsSync(join(toolchain, "bin", "uvx")))
    throw new Error(`no verifier toolchain at ${toolchain}: run the install (./bridle test does)`);
}
