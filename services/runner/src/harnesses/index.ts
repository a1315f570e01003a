import { claudeCode } from "./claude-code.ts";
import { hermes } from "./hermes.ts";
import { opencode } from "./opencode.ts";
import { pi } from "./pi.ts";
import type { HarnessAdapter } from "./types.ts";

export type {
  HarnessAdapter,
  HarnessContext,
  HarnessInstall,
  HarnessLaunch,
  HarnessReport,
  HarnessRun,
} from "./types.ts";

/** Every harness Bridle can run. A fifth is one adapter file and one line here. */
export const harnesses: Record<string, HarnessAdapter> = Object.fromEntries(
  [pi, opencode, hermes, claudeCode].map((h) => [h.name, h]),
);

export const harnessNames = Object.keys(harnesses);
