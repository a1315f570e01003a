import type { EnvironmentImages } from "@bridle/sandbox";

/** How this host makes tasks' sandboxes: the same settings for the tasks service's controls and the verifier. */
export interface SandboxHost {
  /** Where sandboxes are made (the host's temp folder by default). */
  sandboxDir?: string | undefined;
  /** Variables of the user's environment that tasks' `${VAR}` references may read. */
  allowedEnv?: readonly string[];
  /** The verifier toolchain on this host, shown read-only to the tests. */
  toolchain?: string | undefined;
  /** Tasks' images on this host (the tasks service builds them at import); none: bubblewrap on the host's tools. */
  images?: EnvironmentImages | undefined;
}
