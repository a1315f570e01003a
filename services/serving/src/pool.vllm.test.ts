import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AdapterVersion, ModelNodes } from "@bridle/contracts";
import { loadStackConfig, type StackConfig, stackComponents, startComponent } from "@bridle/stack";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bridleHome, makeAdapters, startVllm, type VllmProcess } from "./test-support.ts";

/**
 * A pool of two real vLLM nodes (CPU, the smallest model) behind serving and the guard, both
 * started as real processes from the stack's own component definitions, with the second node
 * given as BRIDLE_VLLM_NODES. Every call goes over HTTP.
 */
const PORT_A = 19685;
const PORT_B = 19686;
const NAME = "smollm2/pi/pool";
const root = mkdtempSync(join(tmpdir(), "bridle-pool-"));
const dir = (name: string) => {
  const path = join(root, name);
  mkdirSync(path, { recursive: true });
  return path;
};
let a: VllmProcess;
let b: VllmProcess;
let config: StackConfig;
let servingUrl: string;
let guardUrl: string;
let adapters: string[];
const running: { stop(signal?: NodeJS.Signals): Promise<void> }[] = [];

const json = async (url: string, body?: unknown, headers: Record<string, string> = {}) => {
  const res = await fetch(url, {
    method: body === undefined ? "GET" : "POST",
    headers: { "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};
const nodes = async () => ModelNodes.parse((await json(`${servingUrl}/v1/nodes`)).body);
const adaptersOn = async (node: VllmProcess) =>
  ((await json(`${node.url}/v1/models`)).body.data as { id: string; root: string; parent?: string | null }[])
    .filter((m) => m.parent)
    .sort((x, y) => x.id.localeCompare(y.id));
const loadedOn = async (node: VllmProcess) => (await adaptersOn(node)).map((m) => m.id);
const waitFor = async (ok: () => Promise<boolean>, ms = 180_000) => {
  const deadline = Date.now() + ms;
  while (!(await ok().catch(() => false))) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 500));
  }
};
const load = async (path: string) => {
  const submitted = await json(`${servingUrl}/v1/adapters/${NAME}/versions`, { path });
  expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
  const { version } = AdapterVersion.parse(submitted.body);
  return AdapterVersion.parse(
    (await json(`${servingUrl}/v1/adapters/${NAME}/versions/${version}?wait=true`)).body,
  );
};
/** A guard session for `model`, and a function that makes one chat call in it. */
const session = async (model: string) => {
  const admin = { authorization: `Bearer ${config.guardAdminToken}` };
  const created = await json(`${guardUrl}/admin/sessions`, { adapter: model, instruction: "Say hi." }, admin);
  expect(created.status).toBe(201);
  const key = { authorization: `Bearer ${created.body.apiKey as string}` };
  return () =>
    json(
      `${guardUrl}/v1/chat/completions`,
      { model: "any", messages: [{ role: "user", content: "Say hi." }], max_tokens: 4 },
      key,
    );
};

beforeAll(async () => {
  adapters = makeAdapters(join(root, "random"), 2);
  [a, b] = await Promise.all([startVllm(PORT_A, 2, dir("a"), 1), startVllm(PORT_B, 2, dir("b"), 1)]);
  config = loadStackConfig({
    BRIDLE_MODEL: "smollm2-135m",
    BRIDLE_HOME: bridleHome,
    BRIDLE_DATA: dir("data"),
    BRIDLE_PORT_BASE: "19690",
    BRIDLE_VLLM_URL: a.url,
    BRIDLE_VLLM_NODES: b.url,
    LOG_LEVEL: "warn",
  });
  servingUrl = `http://${config.host}:${config.ports.serving}`;
  guardUrl = `http://${config.host}:${config.ports.guard}`;
  const components = stackComponents(config);
  for (const name of ["serving", "guard"]) {
    running.push(await startComponent(components.find((c) => c.name === name)!, dir("logs")));
  }
  await waitFor(async () => (await nodes()).nodes.every((n) => n.state === "up"));
});

afterAll(async () => {
  for (const r of running.reverse()) await r.stop("SIGKILL").catch(() => undefined);
  await Promise.all([a?.stop(), b?.stop()]);
  rmSync(root, { recursive: true, force: true });
});

describe("a pool of two vLLM nodes behind serving and the guard", () => {
  it("loads and proves each version on every node, and the guard's sessions get it from either", async () => {
    const v1 = await load(adapters[0]!);
    expect(v1.state).toBe("serving");
    // Each node loaded it from serving's URL into its own cache: no node reads serving's disk.
    for (const [node, folder] of [
      [a, "a"],
      [b, "b"],
    ] as const) {
      expect((await adaptersOn(node)).map((m) => [m.id, m.root])).toEqual([
        [v1.servedName, `${servingUrl}/v1/adapter-files/${v1.hash}`],
      ]);
      expect(existsSync(join(root, folder, "vllm-adapters", v1.hash, "adapter_model.safetensors"))).toBe(
        true,
      );
    }
    const pool = await nodes();
    expect(pool.serving).toEqual([v1.servedName]);
    expect(pool.nodes.map((n) => [n.url, n.state, n.models])).toEqual([
      [a.url, "up", [config.modelName, v1.servedName]],
      [b.url, "up", [config.modelName, v1.servedName]],
    ]);
    // The same weights on both: greedy answers agree token for token.
    const greedy = async (node: VllmProcess) =>
      (
        await json(`${node.url}/v1/completions`, {
          model: v1.servedName,
          prompt: "def add(a, b):",
          max_tokens: 8,
          temperature: 0,
        })
      ).body.choices;
    expect(JSON.stringify(await greedy(a))).toBe(JSON.stringify(await greedy(b)));

    const calls = await Promise.all(Array.from({ length: 4 }, () => session(v1.servedName)));
    for (const call of calls) expect((await call()).status).toBe(200);
  });

  it("keeps answering when a node dies; the node back gets the serving versions again and drops retired ones, and others' adapters stay", async () => {
    const v1 = `${NAME}@v1`;
    const calls = await Promise.all(Array.from({ length: 4 }, () => session(v1)));
    await b.stop(); // SIGKILL: every session pinned to b fails over to a
    for (const call of calls) {
      const res = await call();
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
    await waitFor(async () => (await nodes()).nodes[1]!.state === "down");

    const v2 = await load(adapters[1]!); // loaded on a alone, b being away
    expect(v2.state).toBe("serving");
    expect(await loadedOn(a)).toEqual([v1, v2.servedName]);

    b = await startVllm(PORT_B, 2, dir("b-again"), 1); // a new process: it has no adapter
    await waitFor(async () => (await nodes()).nodes[1]!.models.includes(v2.servedName));
    expect(await loadedOn(b)).toEqual([v1, v2.servedName]);
    const after = await session(v2.servedName);
    expect((await after()).status).toBe(200);

    // A version retired while its node was away stays loaded there: the monitor's next pass unloads
    // it. Here b gets v2 back behind serving's back after v2 is retired. An adapter serving never
    // loaded (the model server may be shared) is left alone.
    const retire = await fetch(`${servingUrl}/v1/adapters/${NAME}/versions/${v2.version}`, {
      method: "DELETE",
    });
    expect(retire.status).toBe(200);
    expect(AdapterVersion.parse(await retire.json()).state).toBe("retired");
    const foreign = "someone-else@v1";
    for (const lora_name of [foreign, v2.servedName]) {
      const res = await fetch(`${b.url}/v1/load_lora_adapter`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ lora_name, lora_path: adapters[0] }),
      });
      expect(res.status).toBe(200);
    }
    await waitFor(async () => !(await loadedOn(b)).includes(v2.servedName), 30_000);
    expect(await loadedOn(b)).toEqual([v1, foreign]); // a pass ran after the foreign load
    expect(await loadedOn(a)).toEqual([v1]);
  });
});
