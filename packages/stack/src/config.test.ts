import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { stackComponents } from "./components.ts";
import {
  allowedCpus,
  autoPrecision,
  loadStackConfig,
  localApiToken,
  oneCpuPerCore,
  parseCpuList,
} from "./config.ts";

describe("stack settings", () => {
  it("derives every service port from the base", () => {
    const config = loadStackConfig({ BRIDLE_PORT_BASE: "9100", BRIDLE_HOME: "/srv/bridle" });
    expect(config.ports).toMatchObject({ gateway: 9100, serving: 9101, tasks: 9102, trainer: 9106 });
    expect(config.data).toBe("/srv/bridle/data");
    expect(config.embeddedVllm).toBe(true);
  });

  it("uses an external model server instead of starting one when BRIDLE_VLLM_URL is set", () => {
    const config = loadStackConfig({ BRIDLE_VLLM_URL: "http://gpu-node:8000" });
    expect(config.embeddedVllm).toBe(false);
    expect(config.vllmUrl).toBe("http://gpu-node:8000");
  });

  it("hands serving and the guard every model server of the pool, the first one first", () => {
    const config = loadStackConfig({
      BRIDLE_VLLM_URL: "http://gpu-a:8000",
      BRIDLE_VLLM_NODES: " http://gpu-b:8000, http://gpu-c:8000,http://gpu-a:8000",
    });
    expect(config.vllmNodes).toEqual(["http://gpu-a:8000", "http://gpu-b:8000", "http://gpu-c:8000"]);
    const env = (name: string) => stackComponents(config).find((c) => c.name === name)!.env;
    expect(env("serving").VLLM_URL).toBe("http://gpu-a:8000,http://gpu-b:8000,http://gpu-c:8000");
    expect(env("guard").UPSTREAM_URL).toBe(env("serving").VLLM_URL);
    expect(loadStackConfig({}).vllmNodes).toEqual(["http://127.0.0.1:8000"]);
    expect(() => loadStackConfig({ BRIDLE_VLLM_NODES: "http://gpu-b:8000,gpu b" })).toThrow(
      /BRIDLE_VLLM_NODES/,
    );
  });

  it("names the variable of a bad setting", () => {
    expect(() => loadStackConfig({ BRIDLE_TEMPORAL_PORT: "70000" })).toThrow(/BRIDLE_TEMPORAL_PORT/);
    expect(() => loadStackConfig({ BRIDLE_VLLM_MAX_LORA_RANK: "12" })).toThrow(
      /BRIDLE_VLLM_MAX_LORA_RANK: must be one of/,
    );
  });

  it("binds vLLM's threads to one CPU per core the stack may use, or to the ones BRIDLE_VLLM_CPUS names", () => {
    // Linux's own list format, as /proc/self/status gives the process's affinity.
    expect(allowedCpus("Name:\tnode\nCpus_allowed_list:\t0-3,8,10-11\n")).toEqual([0, 1, 2, 3, 8, 10, 11]);
    expect(allowedCpus("")).toHaveLength(availableParallelism());
    expect(parseCpuList("3,0-1,1")).toEqual([0, 1, 3]);
    for (const bad of ["", "0-", "a", "3-1", "0,,1", "0-1;2"]) expect(parseCpuList(bad), bad).toBeUndefined();

    // Hyperthreads of one core share its bandwidth: one thread per physical core.
    const smt2 = (cpu: number) => `${cpu % 4},${(cpu % 4) + 4}`; // 4 cores, CPUs n and n+4 siblings
    expect(oneCpuPerCore([0, 1, 2, 3, 4, 5, 6, 7], smt2)).toEqual([0, 1, 2, 3]);
    expect(oneCpuPerCore([2, 5, 6], smt2)).toEqual([2, 5]);
    expect(oneCpuPerCore([0, 1], () => "")).toEqual([0, 1]); // topology unreadable: each its own core

    const mine = oneCpuPerCore(allowedCpus());
    const vllm = (config: ReturnType<typeof loadStackConfig>) =>
      stackComponents(config).find((c) => c.name === "vllm")!.env;
    expect(vllm(loadStackConfig({}))).toMatchObject({
      VLLM_CPU_OMP_THREADS_BIND: mine.join(","),
      OMP_NUM_THREADS: String(mine.length),
    });
    expect(vllm(loadStackConfig({ BRIDLE_VLLM_CPUS: String(mine[0]) }))).toMatchObject({
      VLLM_CPU_OMP_THREADS_BIND: String(mine[0]),
      OMP_NUM_THREADS: "1",
    });
    expect(() => loadStackConfig({ BRIDLE_VLLM_CPUS: "0-x" })).toThrow(
      /BRIDLE_VLLM_CPUS: must be a CPU list/,
    );
    expect(() => loadStackConfig({ BRIDLE_VLLM_CPUS: "9000" })).toThrow(
      /BRIDLE_VLLM_CPUS names CPUs this process may not run on: 9000/,
    );
  });

  it("serves and trains in bf16 only where the CPU multiplies bf16 natively", () => {
    const cpu = (flags: string) => `processor\t: 0\nflags\t\t: fpu sse2 ${flags}\n`;
    expect(autoPrecision(cpu("avx2 avx512f amx_bf16 amx_tile"))).toBe("bf16");
    expect(autoPrecision(cpu("avx2 avx512f avx512_bf16"))).toBe("bf16");
    expect(autoPrecision(cpu("avx2 fma"))).toBe("fp32");
    expect(autoPrecision("")).toBe("fp32");
    const config = loadStackConfig({ BRIDLE_PRECISION: "fp32" });
    const components = stackComponents(config);
    const vllm = components.find((c) => c.name === "vllm")!;
    expect(vllm.args[vllm.args.indexOf("--dtype") + 1]).toBe("float32");
    expect(components.find((c) => c.name === "trainer")!.env.TRAINER_PRECISION).toBe("fp32");
    expect(() => loadStackConfig({ BRIDLE_PRECISION: "fp16" })).toThrow(/BRIDLE_PRECISION/);
  });
});

describe("the gateway's API token", () => {
  it("is made once per home, readable by its owner alone, and handed to the gateway", () => {
    const home = mkdtempSync(join(tmpdir(), "bridle-token-"));
    try {
      const config = loadStackConfig({ BRIDLE_HOME: home });
      expect(config.apiToken).toMatch(/^[\w-]{43}$/);
      expect(statSync(join(home, "api-token")).mode & 0o777).toBe(0o600);
      expect(loadStackConfig({ BRIDLE_HOME: home }).apiToken).toBe(config.apiToken);
      const gateway = stackComponents(config).find((c) => c.name === "gateway")!;
      expect(gateway.env.BRIDLE_API_TOKEN).toBe(config.apiToken);
      // The guard's admin token likewise, held by the guard and its two callers.
      expect(config.guardAdminToken).toMatch(/^[\w-]{43}$/);
      expect(config.guardAdminToken).not.toBe(config.apiToken);
      expect(statSync(join(home, "guard-admin-token")).mode & 0o777).toBe(0o600);
      for (const name of ["guard", "runner", "worker"]) {
        const component = stackComponents(config).find((c) => c.name === name)!;
        expect(component.env.GUARD_ADMIN_TOKEN, name).toBe(config.guardAdminToken);
      }
      // No other component gets it: the harnesses' sandboxes and the gateway's users never see it.
      expect(
        stackComponents(config)
          .filter((c) => c.env.GUARD_ADMIN_TOKEN)
          .map((c) => c.name)
          .sort(),
      ).toEqual(["guard", "runner", "worker"]);
      // A token set explicitly wins; the file is left as it is.
      const explicit = loadStackConfig({ BRIDLE_HOME: home, BRIDLE_API_TOKEN: "x".repeat(20) });
      expect(explicit.apiToken).toBe("x".repeat(20));
      expect(readFileSync(join(home, "api-token"), "utf8").trim()).toBe(config.apiToken);
      chmodSync(join(home, "api-token"), 0o644);
      expect(localApiToken(home)).toBe(config.apiToken);
      expect(statSync(join(home, "api-token")).mode & 0o777).toBe(0o600);
      writeFileSync(join(home, "api-token"), "short\n");
      expect(() => localApiToken(home)).toThrow(/api-token: the API token must have at least 16 characters/);
      expect(() => loadStackConfig({ BRIDLE_HOME: home, BRIDLE_API_TOKEN: "short" })).toThrow(
        /BRIDLE_API_TOKEN/,
      );
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
