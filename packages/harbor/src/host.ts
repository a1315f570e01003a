import type { Readable } from "node:stream";
import { ArtifactRef } from "@bridle/contracts";
import type { EnvironmentImages } from "@bridle/sandbox";
import { callJson, fetchArtifact, ServiceError } from "@bridle/service-kit";

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

/**
 * The source of task images built on another host: the tasks service that built them packs one on
 * request (`GET /v1/images/{digest}`, an artifact reference) and this reads it by reference, its
 * bytes checked against the reference's sha256 as they arrive. Null when the service has not built it.
 */
export function imagesFromTasks(tasksUrl: string): (digest: string) => Promise<Readable | null> {
  return async (digest) => {
    const ref = await callJson(`${tasksUrl}/v1/images/${digest}`, {
      schema: ArtifactRef,
      timeoutMs: 600_000,
    }).catch((err: unknown) => {
      if (err instanceof ServiceError && err.status === 404) return null;
      throw err;
    });
    return ref ? fetchArtifact(ref) : null;
  };
}
