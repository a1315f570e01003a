import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { HarnessCheck } from "@bridle/contracts";
import { createRouter, errorContent, httpError } from "@bridle/service-kit";
import { createRoute, z } from "@hono/zod-openapi";

/**
 * The stored conformance checks of harness versions (`bridle harness check` writes them, one file
 * per version): every runner asks here before a training rollout, wherever it runs, so a version
 * whose check failed is refused on every host.
 */
export function harnessCheckRoutes(dir: string | undefined) {
  return createRouter().openapi(
    createRoute({
      method: "get",
      path: "/harness-checks/{harness}/{version}",
      summary: "A harness version's stored conformance check",
      request: {
        params: z.object({
          harness: z.string().regex(/^[a-z][a-z0-9-]{0,31}$/),
          version: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}$/),
        }),
      },
      responses: {
        200: { description: "The check", content: { "application/json": { schema: HarnessCheck } } },
        404: errorContent("That version was never checked"),
      },
    }),
    async (c) => {
      const { harness, version } = c.req.valid("param");
      const never = () => httpError(404, "check_not_found", `${harness} ${version} was never checked`);
      if (!dir) throw never();
      const file = join(dir, `${harness}@${version}.json`);
      const text = await readFile(file, "utf8").catch(() => {
        throw never();
      });
      try {
        return c.json(HarnessCheck.parse(JSON.parse(text)), 200);
      } catch (err) {
        throw httpError(
          500,
          "harness_check_unreadable",
          `${file} is not a harness check: ${(err as Error).message}`,
        );
      }
    },
  );
}
