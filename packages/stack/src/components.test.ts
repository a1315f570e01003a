import { describe, expect, it } from "vitest";
import { stackComponents } from "./components.ts";
import { loadStackConfig } from "./config.ts";

describe("stack components", () => {
  it("runs the guard on base+3 in front of the model server, with its data under the stack's data folder", () => {
    const config = loadStackConfig({
      BRIDLE_PORT_BASE: "19300",
      BRIDLE_DATA: "/tmp/bridle-stack-test",
      BRIDLE_VLLM_URL: "http://127.0.0.1:19399",
    });
    const guard = stackComponents(config).find((c) => c.name === "guard");
    expect(guard?.env).toMatchObject({
      PORT: "19303",
      UPSTREAM_URL: "http://127.0.0.1:19399",
      GUARD_DATA_DIR: "/tmp/bridle-stack-test/guard",
    });
    expect(guard?.health).toEqual({ kind: "http", url: "http://127.0.0.1:19303/healthz" });
    expect(guard?.args.at(-1)).toMatch(/services\/guard\/src\/main\.ts$/);
  });

  it("lets the model server and the trainer take the cores: everything else runs niced", () => {
    const niceOf = (env: Record<string, string>) =>
      Object.fromEntries(stackComponents(loadStackConfig(env)).map((c) => [c.name, c.nice]));
    const byDefault = niceOf({});
    expect(byDefault).toMatchObject({
      vllm: undefined,
      trainer: undefined,
      runner: 10,
      guard: 10,
      temporal: 10,
    });
    expect(Object.values(niceOf({ BRIDLE_SIDE_NICE: "0" })).every((n) => n === undefined)).toBe(true);
    expect(() => loadStackConfig({ BRIDLE_SIDE_NICE: "20" })).toThrow(/BRIDLE_SIDE_NICE/);
  });
});
