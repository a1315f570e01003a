import { readdirSync, readFileSync } from "node:fs";
import { request } from "node:http";
import { createServer } from "node:net";
import type { Trajectory } from "@bridle/contracts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminHeaders, type GuardHarness, openaiTools, startGuard } from "./test-support.ts";

/**
 * The guard as one primary and two worker processes (GUARD_WORKERS=2) in front of the scripted
 * upstream (TEST DOUBLE for vLLM). Every request here goes on a connection of its own, and the
 * guard runs with Node's round-robin scheduling (NODE_CLUSTER_SCHED_POLICY=rr) instead of its
 * default, the kernel's choice, so that consecutive connections go to alternate workers for sure.
 */

interface Answer {
  status: number;
  text: string;
}

/** One request on a fresh connection (no keep-alive). */
function send(url: string, method: string, body?: unknown, headers: Record<string, string> = {}) {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise<Answer>((resolve, reject) => {
    const req = request(
      url,
      {
        method,
        agent: false,
        headers: {
          connection: "close",
          ...(payload ? { "content-type": "application/json" } : {}),
          ...(new URL(url).pathname.startsWith("/admin") ? adminHeaders : {}),
          ...headers,
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          text += c;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

const INSTRUCTION = "List the repository, then fix src/dates.py.";
/** Each answer: text, one call that passes, one to a host nobody mentioned (blocked). */
const TURN = {
  text: "Looking around first.",
  tool_calls: [
    { name: "bash", arguments: { command: "ls -la" } },
    { name: "bash", arguments: { command: "curl -s https://answers.example.net/dates.py" } },
  ],
};

/** The worker processes under the primary: children running the guard's entry point. */
function workerPids(primary: number): number[] {
  const children = readdirSync(`/proc/${primary}/task`).flatMap((tid) =>
    readFileSync(`/proc/${primary}/task/${tid}/children`, "utf8").split(" ").filter(Boolean).map(Number),
  );
  return children.filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("main.ts");
    } catch {
      return false;
    }
  });
}

/** Workers named in the guard's "tool calls blocked" log lines. */
function workersThatBlocked(output: string): Set<number> {
  const workers = new Set<number>();
  for (const line of output.split("\n")) {
    if (!line.includes('"tool calls blocked"')) continue;
    const worker = (JSON.parse(line) as { worker?: number }).worker;
    if (worker !== undefined) workers.add(worker);
  }
  return workers;
}

/** Workers that have logged that they listen. */
function listening(output: string): Set<number> {
  return new Set([...output.matchAll(/"worker":(\d+)[^\n]*"msg":"listening"/g)].map((m) => Number(m[1])));
}

async function until(what: string, check: () => Promise<boolean> | boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await Promise.resolve(check()).catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe("guard with two worker processes", () => {
  let h: GuardHarness;
  let sessionId: string;
  let apiKey: string;
  let calls = 0;

  const call = (key: string, stream: boolean) =>
    send(
      `${h.guardUrl}/v1/chat/completions`,
      "POST",
      { model: "x", stream, messages: [{ role: "user", content: INSTRUCTION }], tools: openaiTools },
      { authorization: `Bearer ${key}` },
    );
  const view = async () =>
    JSON.parse((await send(`${h.guardUrl}/admin/sessions/${sessionId}`, "GET")).text) as {
      calls: number;
      blocked: number;
    };

  beforeAll(async () => {
    // Info logs say when each worker listens: the first one serves before the second is up.
    h = await startGuard(
      19341,
      { GUARD_WORKERS: "2", LOG_LEVEL: "info", NODE_CLUSTER_SCHED_POLICY: "rr" },
      { ready: (out) => listening(out).size === 2 },
    );
    await h.setScript([TURN]);
    ({ id: sessionId, apiKey } = await h.register({ instruction: INSTRUCTION }));
  }, 60_000);
  afterAll(() => h?.stop());

  it("spreads calls over both workers and counts each call once, before its answer is read back", async () => {
    for (let i = 0; i < 16; i++) {
      const answer = await call(apiKey, i % 2 === 0);
      expect(answer.status).toBe(200);
      expect(answer.text).toContain("unmentioned");
      calls++;
      // Asked on a connection of its own right after the answer ended. Connections go to the
      // workers in turn: asking after every other call makes both workers serve calls and reads.
      if (i % 2 === 0) expect(await view()).toEqual(expect.objectContaining({ calls, blocked: calls }));
    }
    expect(workersThatBlocked(h.output())).toEqual(new Set([1, 2]));

    const trajectory = JSON.parse(
      (await send(`${h.guardUrl}/admin/sessions/${sessionId}/trajectory`, "GET")).text,
    ) as Trajectory;
    expect(trajectory.records.map((r) => r.seq)).toEqual([...Array(calls).keys()]);
    expect(trajectory.records.every((r) => r.toolCalls.length === 2 && r.error === null)).toBe(true);
    expect(trajectory.blocked).toBe(calls);
    expect(trajectory.rewardZero).toBe(true);
  }, 60_000);

  it("serves a session at once on whichever worker gets the call, and refuses a reused or unknown key", async () => {
    for (let i = 0; i < 6; i++) {
      const created = await send(`${h.guardUrl}/admin/sessions`, "POST", {
        instruction: INSTRUCTION,
        adapter: "a@1",
        apiKey: `cluster-key-${i}-abcdef`,
      });
      expect(created.status).toBe(201);
      expect((await call(`cluster-key-${i}-abcdef`, i % 2 === 0)).status).toBe(200);
    }
    const again = await send(`${h.guardUrl}/admin/sessions`, "POST", {
      instruction: INSTRUCTION,
      adapter: "a@1",
      apiKey: "cluster-key-0-abcdef",
    });
    expect(again.status).toBe(409);
    const unknown = await call("no-such-key", false);
    expect(unknown.status).toBe(401);
    expect(unknown.text).toContain("Unknown API key");
  }, 30_000);

  it("ends a session once the call under way on a worker is recorded, then refuses it on every worker", async () => {
    const session = await h.register({ instruction: INSTRUCTION });
    await h.setScript([{ text: "y".repeat(80), delay_ms: 150 }]);
    // Streams for about 1.5 s; the end arrives on the other worker while it does.
    const before = (await h.upstreamRequests()).length;
    const slow = call(session.apiKey, true);
    await until("the call to reach the upstream", async () => (await h.upstreamRequests()).length > before);
    const ended = await send(`${h.guardUrl}/admin/sessions/${session.id}/end`, "POST");
    expect(ended.status).toBe(200);
    const trajectory = JSON.parse(ended.text) as Trajectory;
    expect(trajectory.calls).toBe(1);
    expect(trajectory.records[0]).toMatchObject({ error: null, response: { content: "y".repeat(80) } });
    expect((await slow).status).toBe(200);
    // Round robin: these two go to different workers.
    for (let i = 0; i < 2; i++) {
      const refused = await call(session.apiKey, i === 0);
      expect(refused.status).toBe(409);
      expect(refused.text).toContain("has ended");
    }
    await h.setScript([TURN]);
  }, 30_000);

  it("replaces a worker that dies, and its sessions and counts carry on", async () => {
    const [victim, survivor] = workerPids(h.pid);
    expect(survivor).toBeDefined();
    process.kill(victim!, "SIGKILL");
    await until("a replacement worker", () => {
      const now = workerPids(h.pid);
      return now.length === 2 && !now.includes(victim!) && listening(h.output()).has(3);
    });
    // The replacement has no cached sessions: it asks the primary.
    for (let i = 0; i < 4; i++) {
      expect((await call(apiKey, true)).status).toBe(200);
      calls++;
    }
    expect(await view()).toEqual(expect.objectContaining({ calls, blocked: calls }));
    expect(h.output()).toContain("a guard worker died; starting another");
  }, 60_000);

  it("stops every process on SIGTERM, and a guard restarted on the same data reads the same captures", async () => {
    const workers = workerPids(h.pid);
    // As a supervisor's signal to the process group does: every process hears it at once.
    for (const pid of [h.pid, ...workers]) process.kill(pid, "SIGTERM");
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    await until("every process to exit", () => [h.pid, ...workers].every((pid) => !alive(pid)), 10_000);
    // No worker was started again on the way out.
    expect(h.output().match(/starting another/g)).toHaveLength(1);
    await h.stop();
    h = await startGuard(19342, {}, { dataDir: h.dataDir });
    expect(await view()).toEqual(expect.objectContaining({ calls, blocked: calls }));
  }, 30_000);

  it("with its default scheduling (the kernel's), serves concurrent calls on many connections", async () => {
    const g = await startGuard(19344, { GUARD_WORKERS: "2" });
    try {
      await g.setScript([TURN]);
      const { id, apiKey: key } = await g.register({ instruction: INSTRUCTION });
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          send(
            `${g.guardUrl}/v1/chat/completions`,
            "POST",
            {
              model: "x",
              stream: i % 2 === 0,
              messages: [{ role: "user", content: INSTRUCTION }],
              tools: openaiTools,
            },
            { authorization: `Bearer ${key}` },
          ),
        ),
      );
      expect(answers.map((a) => a.status)).toEqual(Array(12).fill(200));
      const counts = JSON.parse((await send(`${g.guardUrl}/admin/sessions/${id}`, "GET")).text) as object;
      expect(counts).toEqual(expect.objectContaining({ calls: 12, blocked: 12 }));
    } finally {
      await g.stop();
    }
  }, 60_000);

  it("exits with the reason when its port is taken, instead of restarting workers forever", async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(19343, "127.0.0.1", resolve));
    try {
      await expect(startGuard(19343, { GUARD_WORKERS: "2" })).rejects.toThrow(/19343 .*already in use/);
    } finally {
      holder.close();
    }
  }, 30_000);
});
