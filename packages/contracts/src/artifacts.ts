import { z } from "zod";

/**
 * A file one service hands another, by reference: the owner serves it at `url` and the receiver
 * checks what it reads against `sha256` and `bytes`. How workspaces travel from the runner to the
 * verifier (a folder packed as one tar).
 */
export const ArtifactRef = z
  .object({
    url: z.string().url().describe("Where the owning service serves the artifact's bytes"),
    sha256: z.string().regex(/^[0-9a-f]{64}$/, "a sha256 in hex"),
    bytes: z.number().int().nonnegative(),
  })
  .strict();
export type ArtifactRef = z.infer<typeof ArtifactRef>;
