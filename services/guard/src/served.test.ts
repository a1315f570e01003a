import { createServer, type Server } from "node:http";
import { createLogger } from "@bridle/service-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ServedModels } from "./proxy/served.ts";

/**
 * STAND-IN for serving's registry (its two read routes, answering what the test sets): the real
 * serving needs the model server; the end-to-end tests check the guard against the real one.
 */
let registry: { adapters: unknown[] } = { adapters: [] };
let reads = 0;
let server: Server;
const PORT = 19391;
beforeAll(async () => {
  server = createServer((req, res) => {
    reads++;
    res.setHeader("content-type", "application/json");
    if (req.url === "/v1/base-model")
      res.end(JSON.stringify({ id: "base-m", root: "/m", maxModelLen: 8192, adapters: [] }));
    else res.end(JSON.stringify(registry));
  });
  await new Promise<void>((resolve) => server.listen(PORT, "127.0.0.1", resolve));
});
afterAll(() => server?.close());

const version = (n: number, state = "serving") => ({
  name: "base-m/pi/run",
  version: n,
  servedName: `base-m/pi/run@v${n}`,
  path: `/a/${n}`,
  hash: `${n}`.repeat(64),
  step: n,
  state,
  error: null,
  canaryDelta: 0.5,
  createdAt: "2026-12-05T00:00:00.000Z",
  updatedAt: "2026-12-05T00:00:00.000Z",
});

describe("what served a call, per serving's registry", () => {
  it("names an adapter version's weights, a bare name's current version, and the base model", async () => {
    registry = { adapters: [{ name: "base-m/pi/run", current: 2, versions: [version(1), version(2)] }] };
    const served = new ServedModels(`http://127.0.0.1:${PORT}`, createLogger("guard", "silent"));
    expect(await served.resolve("base-m/pi/run@v1")).toEqual({
      model: "base-m/pi/run@v1",
      adapter: "base-m/pi/run",
      version: 1,
      hash: "1".repeat(64),
    });
    expect(await served.resolve("base-m/pi/run")).toMatchObject({ version: 2, hash: "2".repeat(64) });
    expect(await served.resolve("base-m")).toEqual({
      model: "base-m",
      adapter: null,
      version: null,
      hash: null,
    });
    expect(await served.resolve("someone-else")).toBeNull();
    // A versioned name always means the same weights: read once, then kept.
    const before = reads;
    expect(await served.resolve("base-m/pi/run@v1")).toMatchObject({ version: 1 });
    expect(reads).toBe(before);
  });

  it("proves nothing for a version no longer served, or when serving cannot be reached", async () => {
    registry = { adapters: [{ name: "base-m/pi/run", current: null, versions: [version(3, "retired")] }] };
    const served = new ServedModels(`http://127.0.0.1:${PORT}`, createLogger("guard", "silent"));
    expect(await served.resolve("base-m/pi/run@v3")).toBeNull();
    const gone = new ServedModels("http://127.0.0.1:19392", createLogger("guard", "silent"));
    expect(await gone.resolve("base-m")).toBeNull();
  });
});
