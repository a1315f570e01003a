import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { ModelNodes } from "@bridle/contracts";
import { type ScriptedUpstream, startScriptedUpstream } from "@bridle/testkit";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type GuardHarness, startGuard } from "./test-support.ts";

/**
 * The guard as a real process in front of a pool of two model servers. The model servers are
 * scripted upstreams (TEST DOUBLES for vLLM nodes), and serving's map of the pool is a stand-in
 * too (`/v1/nodes`, set by each test), so each case can say which node has which adapter. Serving's
 * own map over real vLLM nodes is tested in services/serving (pool.vllm.test.ts).
 */
const ADAPTER = "smollm2/pi/run@v3";
let a: ScriptedUpstream;
let b: ScriptedUpstream;
let map: ModelNodes;
let serving: Server;
let servingUrl: string;
let routed: GuardHarness;
let plain: GuardHarness;

const node = (upstream: ScriptedUpstream, models: string[], state: "up" | "down" = "up") => ({
  url: upstream.url,
  state,
  models,
  error: null,
});
const requests = async (upstream: ScriptedUpstream) =>
  (await (await fetch(`${upstream.url}/_scripted/requests`)).json()) as { model?: string }[];
/** Setting a node's script again empties its request log. */
const clear = (upstream: ScriptedUpstream, text: string) =>
  fetch(`${upstream.url}/_scripted/script`, { method: "PUT", body: JSON.stringify([{ text }]) });

async function call(guard: GuardHarness, apiKey: string) {
  const res = await fetch(`${guard.guardUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ model: "any", messages: [{ role: "user", content: "Say hi." }] }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

beforeAll(async () => {
  a = await startScriptedUpstream({ script: [{ text: "from a" }] });
  b = await startScriptedUpstream({ script: [{ text: "from b" }] });
  serving = createServer((req, res) => {
    if (req.url === "/v1/nodes") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(map));
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((resolve) => serving.listen(0, "127.0.0.1", resolve));
  servingUrl = `http://127.0.0.1:${(serving.address() as AddressInfo).port}`;
  const both = `${a.url},${b.url}`;
  [routed, plain] = await Promise.all([
    startGuard(19361, { SERVING_URL: servingUrl }, { upstreamUrl: both }),
    startGuard(19362, {}, { upstreamUrl: both }),
  ]);
});

afterAll(async () => {
  await Promise.all([routed?.stop(), plain?.stop()]);
  await Promise.all([a?.close(), b?.close()]);
  serving?.close();
});

afterEach(async () => {
  await Promise.all([clear(a, "from a"), clear(b, "from b")]).catch(() => undefined); // b may be closed
});

/** Waits out the guard's cached map (2 s) after the stand-in's map changed. */
const mapChanged = (next: ModelNodes) => {
  map = next;
  return new Promise((r) => setTimeout(r, 2_100));
};

describe("the guard routes each session to a model server that has its adapter", () => {
  it("sends an adapter's calls only to the node that has it loaded, and one session keeps to one node", async () => {
    await mapChanged({
      baseModel: "smollm2",
      serving: [ADAPTER],
      nodes: [node(a, ["smollm2"]), node(b, ["smollm2", ADAPTER])],
    });
    const { apiKey } = await routed.register({ instruction: "Say hi.", adapter: ADAPTER });
    for (let i = 0; i < 4; i++) expect((await call(routed, apiKey)).status).toBe(200);
    expect((await requests(b)).map((r) => r.model)).toEqual([ADAPTER, ADAPTER, ADAPTER, ADAPTER]);
    expect(await requests(a)).toEqual([]);

    // The base model is on both: each session sticks to one node (its prefix cache), and sessions
    // spread over both (keys are random: 32 sessions all on one node is a 2^-31 chance).
    const sessions = await Promise.all(
      Array.from({ length: 32 }, () => routed.register({ instruction: "Say hi.", adapter: "smollm2" })),
    );
    const nodeOf = new Map<string, string>();
    for (const { apiKey: key } of sessions) {
      for (let i = 0; i < 2; i++) {
        const { body } = await call(routed, key);
        const text = (body.choices as { message: { content: string } }[])[0]!.message.content;
        expect(nodeOf.get(key) ?? text).toBe(text);
        nodeOf.set(key, text);
      }
    }
    expect(new Set(nodeOf.values())).toEqual(new Set(["from a", "from b"]));
  }, 30_000);

  it("fails over to another node that has the adapter when one cannot be reached, and never to one without it", async () => {
    const dead = `http://127.0.0.1:1`;
    await mapChanged({
      baseModel: "smollm2",
      serving: [ADAPTER],
      nodes: [
        { url: dead, state: "up", models: ["smollm2", ADAPTER], error: null },
        node(a, ["smollm2", ADAPTER]),
        node(b, ["smollm2"]),
      ],
    });
    const sessions = await Promise.all(
      Array.from({ length: 6 }, () => routed.register({ instruction: "Say hi.", adapter: ADAPTER })),
    );
    for (const { apiKey } of sessions) expect((await call(routed, apiKey)).status).toBe(200);
    expect((await requests(a)).length).toBe(6);
    expect(await requests(b)).toEqual([]);

    // The only node that has it is unreachable: a retryable 503 to the harness, not the base model
    // or a node that lacks the adapter.
    await mapChanged({
      baseModel: "smollm2",
      serving: [ADAPTER],
      nodes: [{ url: dead, state: "up", models: ["smollm2", ADAPTER], error: null }, node(a, ["smollm2"])],
    });
    await clear(a, "from a");
    const { status, body } = await call(routed, sessions[0]!.apiKey);
    expect(status).toBe(503);
    expect(JSON.stringify(body)).toContain(`no model server for ${ADAPTER} could be reached`);
    expect(await requests(a)).toEqual([]);

    // A node serving knows is down is not tried at all, nor one that has not loaded the version
    // yet: the harness is told to retry. A name serving does not serve goes to a node, which refuses it.
    await mapChanged({
      baseModel: "smollm2",
      serving: [ADAPTER],
      nodes: [node(b, [], "down"), node(a, ["smollm2"])],
    });
    const down = await call(routed, sessions[0]!.apiKey);
    expect(down.status).toBe(503);
    expect(JSON.stringify(down.body)).toContain(`no model server that is up has ${ADAPTER} loaded yet`);
    expect(await requests(b)).toEqual([]);
    expect(await requests(a)).toEqual([]);
    const unknown = await routed.register({ instruction: "Say hi.", adapter: "smollm2/pi/other@v1" });
    expect((await call(routed, unknown.apiKey)).status).toBe(200); // a vLLM node would answer 404
    expect((await requests(a)).map((r) => r.model)).toEqual(["smollm2/pi/other@v1"]);

    // A map with no node up (serving just started, or lost them all): the configured nodes are tried.
    await mapChanged({ baseModel: null, serving: [], nodes: [node(a, [], "down"), node(b, [], "down")] });
    expect((await call(routed, sessions[1]!.apiKey)).status).toBe(200);
  }, 30_000);

  it("without serving, routes over the configured nodes and skips one that went away", async () => {
    // Keys are random and hashed to a node: 32 sessions all on one node is a 2^-31 chance (6 were
    // a 1-in-32 chance, and failed a run).
    const sessions = await Promise.all(
      Array.from({ length: 32 }, () => plain.register({ instruction: "Say hi.", adapter: ADAPTER })),
    );
    for (const { apiKey } of sessions) expect((await call(plain, apiKey)).status).toBe(200);
    const before = [(await requests(a)).length, (await requests(b)).length];
    expect(before[0]! + before[1]!).toBe(32);
    expect(before.every((n) => n > 0)).toBe(true);

    await b.close();
    for (const { apiKey } of sessions) {
      const { status, body } = await call(plain, apiKey);
      expect(status).toBe(200);
      expect((body.choices as { message: { content: string } }[])[0]!.message.content).toBe("from a");
    }
  }, 30_000);
});
