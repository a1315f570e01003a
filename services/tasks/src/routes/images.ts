import { ArtifactRef } from "@bridle/contracts";
import type { EnvironmentImages } from "@bridle/sandbox";
import {
  type ArtifactStore,
  artifactRoutes,
  createRouter,
  errorContent,
  httpError,
} from "@bridle/service-kit";
import { createRoute, z } from "@hono/zod-openapi";

/**
 * Task images for hosts that did not build them: a runner or verifier elsewhere asks for an image
 * by digest and gets an artifact reference; the image is packed once per process and served, like
 * every artifact, by its sha256.
 */
export function imageRoutes(images: EnvironmentImages | undefined, artifacts: ArtifactStore) {
  const packed = new Map<string, Promise<ArtifactRef>>();
  const pack = (digest: string) => {
    let ref = packed.get(digest);
    if (!ref) {
      ref = (async () => {
        const archive = await images?.pack(digest);
        if (!archive) throw httpError(404, "image_not_found", `no image ${digest} is built here`);
        return artifacts.put(archive);
      })();
      ref.catch(() => packed.delete(digest));
      packed.set(digest, ref);
    }
    return ref;
  };
  return createRouter()
    .openapi(
      createRoute({
        method: "get",
        path: "/images/{digest}",
        summary:
          "A task image built here, packed for a host that has not built it: a reference to fetch (its bytes checked against the sha256)",
        request: { params: z.object({ digest: z.string().regex(/^[0-9a-f]{64}$/) }) },
        responses: {
          200: { description: "The packed image", content: { "application/json": { schema: ArtifactRef } } },
          404: errorContent("No such image is built here"),
        },
      }),
      async (c) => c.json(await pack(c.req.valid("param").digest), 200),
    )
    .route("/", artifactRoutes(artifacts));
}
