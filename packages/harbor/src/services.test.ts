import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { EnvironmentImages } from "@bridle/sandbox";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { validateTask } from "./index.ts";
import { buildableImages } from "./test-support.ts";

let images: EnvironmentImages;
let dir: string;

/**
 * A Harbor task with a counter service beside its container: the solution bumps the counter, the
 * tests read `tests_read` from it (the counter as the tests' service sees it, or the file the
 * solution wrote).
 */
async function counterTask(name: string, testsRead: "service" | "file"): Promise<string> {
  const task = join(dir, name);
  const files: Record<string, string> = {
    "task.toml": 'version = "1.0"\n[metadata]\ncategory = "qa"\n',
    "instruction.md":
      "Bump the counter at http://counter:8080/ once, and write what it answers into count.txt.\n",
    "environment/Dockerfile": "FROM python:3.11-slim\nWORKDIR /app\n",
    "environment/docker-compose.yaml":
      "services:\n  main: {}\n  counter:\n    build:\n      context: ./counter\n",
    "environment/counter/Dockerfile":
      'FROM python:3.11-slim\nCOPY counter.py /counter.py\nCMD ["python3", "/counter.py"]\n',
    "environment/counter/counter.py": [
      "import http.server",
      "count = 0",
      "class H(http.server.BaseHTTPRequestHandler):",
      "    def do_GET(self):",
      "        global count",
      "        if self.path == '/bump': count += 1",
      "        self.send_response(200); self.end_headers(); self.wfile.write(str(count).encode())",
      "http.server.HTTPServer(('127.0.0.1', 8080), H).serve_forever()",
      "",
    ].join("\n"),
    "solution/solve.sh":
      "#!/bin/bash\npython3 -c \"import urllib.request; open('count.txt', 'w').write(urllib.request.urlopen('http://counter:8080/bump').read().decode())\"\n",
    "tests/test.sh": [
      "#!/bin/bash",
      "mkdir -p /logs/verifier",
      testsRead === "service"
        ? "seen=$(python3 -c \"import urllib.request; print(urllib.request.urlopen('http://counter:8080/').read().decode())\")"
        : "seen=$(cat /app/count.txt 2>/dev/null)",
      'if [ "$seen" = 1 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt',
      "",
    ].join("\n"),
  };
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(task, path)), { recursive: true });
    await writeFile(join(task, path), content);
  }
  return task;
}

beforeAll(async () => {
  images = await buildableImages();
  dir = await mkdtemp(join(tmpdir(), "bridle-services-"));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

describe("a task's services in its controls", () => {
  it("start afresh for the tests, as the verifier starts them for a rollout's tests", async () => {
    // What the solution wrote into its own workspace reaches the tests.
    const file = await validateTask(await counterTask("counter-file", "file"), { images, repeats: 1 });
    expect(file.verdict.problems).toEqual([]);
    expect(file.verdict.services.map((s) => s.name)).toEqual(["counter"]);

    // What it left in the service does not: the tests see a fresh counter, in a control as in a
    // rollout, so a task that needs it fails its oracle instead of failing every rollout later.
    const service = await validateTask(await counterTask("counter-service", "service"), {
      images,
      repeats: 1,
    });
    expect(service.verdict.ok).toBe(false);
    expect(service.verdict.controls?.runs.map((r) => [r.control, r.reward])).toEqual([
      ["oracle", 0],
      ["nop", 0],
    ]);
  }, 600_000);
});
