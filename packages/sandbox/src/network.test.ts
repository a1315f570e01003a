import { existsSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { SharedNetwork } from "./network.ts";
import { Sandbox } from "./sandbox.ts";

/** Serves "hello from web" on port 8765 of the sandbox's loopback until stopped. */
const SERVE = [
  "python3",
  "-c",
  [
    "import http.server",
    "class H(http.server.BaseHTTPRequestHandler):",
    "    def do_GET(self):",
    "        self.send_response(200); self.end_headers(); self.wfile.write(b'hello from web')",
    "http.server.HTTPServer(('127.0.0.1', 8765), H).serve_forever()",
  ].join("\n"),
];
const FETCH = (host: string) => [
  "python3",
  "-c",
  `import urllib.request; print(urllib.request.urlopen('http://${host}:8765/', timeout=5).read().decode())`,
];

describe("SharedNetwork", () => {
  const cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step();
  });

  it("lets sandboxes on it reach each other by name, and no sandbox off it", async () => {
    const network = await SharedNetwork.create(["web"]);
    cleanup.push(() => network.dispose());
    const server = await Sandbox.create({ network });
    const client = await Sandbox.create({ network });
    const outsider = await Sandbox.create();
    cleanup.push(
      () => server.dispose(),
      () => client.dispose(),
      () => outsider.dispose(),
    );

    const stop = new AbortController();
    const serving = server.run(SERVE, { timeoutMs: 60_000, signal: stop.signal });
    for (let i = 0; i < 100 && (await network.listeners()) === 0; i++)
      await new Promise((r) => setTimeout(r, 100));
    expect(await network.listeners()).toBe(1);

    const reached = await client.run(FETCH("web"), { timeoutMs: 20_000 });
    expect(reached.stderr).toBe("");
    expect(reached.stdout.trim()).toBe("hello from web");
    // A sandbox of its own network has neither the name nor the server.
    const alone = await outsider.run(FETCH("127.0.0.1"), { timeoutMs: 20_000 });
    expect(alone.exitCode).not.toBe(0);
    expect(alone.stderr).toMatch(/Connection refused|URLError/);

    stop.abort();
    expect((await serving).cancelled).toBe(true);
  });

  it("ends with dispose: its holder is gone and its namespace with it", async () => {
    const network = await SharedNetwork.create([]);
    expect(existsSync(network.path)).toBe(true);
    await network.dispose();
    expect(existsSync(network.path)).toBe(false);
  });

  it("refuses a name that is not a host name", async () => {
    await expect(SharedNetwork.create(["web;reboot"])).rejects.toThrow(/not a host name/);
  });
});
