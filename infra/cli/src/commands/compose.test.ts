import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { SearchAttributes, TaskQueues } from "@bridle/contracts";
import { repoRoot } from "@bridle/service-kit";
import { loadStackConfig, stackComponents } from "@bridle/stack";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { composeEnv } from "./compose.ts";

/**
 * The compose layout is written out by hand (it is the deployment guide's worked example), so it
 * can drift from the code it starts. These checks catch that cheaply; `infra/compose/trial.sh`
 * runs the layout for real (a short training run, about 20 minutes of the whole machine).
 */
interface Service {
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
}
const file = join(repoRoot, "infra", "compose", "compose.yaml");
const text = readFileSync(file, "utf8");
const services = (parse(text, { merge: true }) as { services: Record<string, Service> }).services;

/** `--flag value` and `--flag=value` alike, as flag -> value ("" for a bare flag). */
function flags(args: string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (!arg.startsWith("--")) continue;
    const eq = arg.indexOf("=");
    if (eq > 0) out.set(arg.slice(0, eq), arg.slice(eq + 1));
    else if (args[i + 1] !== undefined && !args[i + 1]!.startsWith("--")) out.set(arg, args[++i]!);
    else out.set(arg, "");
  }
  return out;
}

/** The port each service listens on inside its container. */
function portOf(service: Service): number | undefined {
  if (service.environment?.PORT) return Number(service.environment.PORT);
  const flag = service.command?.find((a) => a.startsWith("--port="));
  return flag ? Number(flag.slice("--port=".length)) : undefined;
}

describe("the compose layout", () => {
  it("takes exactly the variables `bridle compose env` prints, and the image", () => {
    const used = new Set([...text.matchAll(/\$\{([A-Z0-9_]+)\}/g)].map((m) => m[1]));
    const config = loadStackConfig({
      BRIDLE_API_TOKEN: "t".repeat(32),
      BRIDLE_GUARD_ADMIN_TOKEN: "g".repeat(32),
    });
    const printed = new Set([...Object.keys(composeEnv(config)), "BRIDLE_NODE_IMAGE"]);
    expect([...used].sort()).toEqual([...printed].sort());
  });

  it("starts vLLM with the stack's own flags and environment", () => {
    const config = loadStackConfig({
      BRIDLE_API_TOKEN: "t".repeat(32),
      BRIDLE_GUARD_ADMIN_TOKEN: "g".repeat(32),
    });
    const values = composeEnv(config);
    const fill = (text: string) =>
      text.replace(/\$\{([A-Z0-9_]+)\}/g, (_, name: string) => values[name] ?? "");
    const stack = stackComponents(config).find((c) => c.name === "vllm")!;
    const compose = services.vllm!;
    const [command, ...args] = compose.command!.map(fill);
    expect(command).toBe(stack.command);
    expect(args.slice(0, 2)).toEqual(stack.args.slice(0, 2)); // -m and the entry module
    // In its container vLLM listens on every interface, on the port the layout's URLs name.
    const own = { "--host": "0.0.0.0", "--port": "8000" };
    expect(Object.fromEntries(flags(args))).toEqual({ ...Object.fromEntries(flags(stack.args)), ...own });
    // Its adapters go to the container's own data volume instead of the stack's data folder.
    const env = Object.fromEntries(Object.entries(compose.environment!).map(([k, v]) => [k, fill(v)]));
    expect(env).toEqual({ ...stack.env, BRIDLE_ADAPTER_CACHE: "/data/adapters" });
  });

  it("starts entry files that exist, and Temporal with the contracts' namespace and search attributes", () => {
    for (const [name, service] of Object.entries(services)) {
      const entry = service.command?.find((a) => a.endsWith(".ts"));
      if (entry) expect(existsSync(join(repoRoot, entry)), `${name}: ${entry}`).toBe(true);
    }
    const temporal = services.temporal?.command ?? [];
    const declared = temporal
      .filter((a) => a.startsWith("--search-attribute="))
      .map((a) => a.slice("--search-attribute=".length));
    const types = { KEYWORD: "Keyword", INT: "Int", DOUBLE: "Double" } as const;
    expect(declared.sort()).toEqual(
      Object.values(SearchAttributes)
        .map((a) => `${a.name}=${types[a.type]}`)
        .sort(),
    );
    expect(temporal).toContain("--namespace=bridle");
  });

  it("points every URL at a service of the layout on the port it listens on", () => {
    let urls = 0;
    for (const [name, service] of Object.entries(services)) {
      for (const [key, value] of Object.entries(service.environment ?? {})) {
        for (const m of value.matchAll(/\b(?:http:\/\/)?([a-z][a-z0-9-]*):(\d+)\b/g)) {
          const [, host, port] = m;
          if (host === "127.0.0.1" || host === "http" || host === "https") continue;
          const target = services[host!];
          expect(target, `${name} ${key}: no service ${host}`).toBeDefined();
          expect(portOf(target!), `${name} ${key}: ${host} listens elsewhere`).toBe(Number(port));
          urls++;
        }
      }
    }
    expect(urls).toBeGreaterThan(30);
  });

  it("gives every container that keeps data a volume of its own and mounts the checkout read-only", () => {
    const owners = new Map<string, string>();
    for (const [name, service] of Object.entries(services)) {
      const data = (service.volumes ?? []).filter((v) => v.endsWith(":/data"));
      const keeps = JSON.stringify([service.command, service.environment]).includes("/data");
      expect(data, name).toHaveLength(keeps ? 1 : 0);
      if (!keeps) continue;
      const volume = data[0]!.split(":")[0]!;
      expect(owners.get(volume), `${name} shares ${volume}`).toBeUndefined();
      owners.set(volume, name);
      for (const mount of (service.volumes ?? []).filter((v) => v.startsWith("${")))
        expect(mount, name).toMatch(/:ro$/);
    }
  });

  it("has a worker on every task queue, and two rollout nodes each with its own guard and runner", () => {
    const queues = Object.values(services).flatMap((s) => s.environment?.WORKER_QUEUES?.split(",") ?? []);
    for (const queue of Object.keys(TaskQueues)) expect(queues, queue).toContain(queue);
    for (const node of ["a", "b"]) {
      const worker = services[`${node}-worker`]?.environment ?? {};
      expect(worker.WORKER_QUEUES).toBe("rollout");
      expect(worker.RUNNER_URL).toBe(`http://${node}-runner:8704`);
      expect(worker.GUARD_URL).toBe(`http://${node}-guard:8703`);
      expect(services[`${node}-runner`]?.environment?.GUARD_URL).toBe(`http://${node}-guard:8703`);
    }
  });
});
