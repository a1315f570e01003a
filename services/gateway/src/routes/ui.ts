import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createRouter } from "@bridle/service-kit";

/**
 * The dashboard: one static page and its script, styles and charting library (uPlot), read once.
 * They hold no data and need no token; the page reads the API (`/v1`, behind the bearer token)
 * from the browser, with the token given in the address's fragment or typed in.
 */
export function dashboardRoutes() {
  const own = (file: string) => readFileSync(new URL(`../../ui/${file}`, import.meta.url));
  const uplot = (file: string) => readFileSync(createRequire(import.meta.url).resolve(`uplot/dist/${file}`));
  const files: Record<string, { body: Buffer; type: string }> = {
    "": { body: own("index.html"), type: "text/html; charset=utf-8" },
    "app.js": { body: own("app.js"), type: "text/javascript; charset=utf-8" },
    "app.css": { body: own("app.css"), type: "text/css; charset=utf-8" },
    "uplot.js": { body: uplot("uPlot.iife.min.js"), type: "text/javascript; charset=utf-8" },
    "uplot.css": { body: uplot("uPlot.min.css"), type: "text/css; charset=utf-8" },
  };
  const headers = {
    // Only this origin's own files run; nothing is framed, sniffed or sent on as a referrer.
    "content-security-policy":
      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
  };
  return createRouter()
    .get("/", (c) => c.redirect("/ui/", 302))
    .get("/ui", (c) => c.redirect("/ui/", 302))
    .get("/ui/:file{[a-z.]*}", (c) => {
      const file = files[c.req.param("file")];
      if (!file)
        return c.json({ error: { code: "not_found", message: "no such file of the dashboard" } }, 404);
      return c.body(new Uint8Array(file.body), 200, { ...headers, "content-type": file.type });
    });
}
