import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ErrorBody, type HarnessCheck, RolloutResult, RolloutState, SessionView } from "@bridle/contracts";
import { loadStackConfig } from "@bridle/stack";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { harnesses } from "./harnesses/index.ts";
import { guardAdminHeaders, startRolloutStack } from "./test-stack.ts";

const TASK = "repair-slugify-visible-test";
const run = (command: string) => ({ name: "bash", arguments: { command } });
const solved = [{ tool_calls: [run("python3 test_slug.py || true")] }, { text: "I ran the tests." }];

let stack: Awaited<ReturnType<typeof startRolloutStack>>;
beforeAll(async () => {
  stack = await startRolloutStack(19720, [
    TASK,
    join(import.meta.dirname, "..", "fixtures", "offline-answer"),
    join(import.meta.dirname, "..", "fixtures", "own-workdir"),
    join(import.meta.dirname, "..", "fixtures", "task-env"),
    join(import.meta.dirname, "..", "fixtures", "image-task"),
    join(import.meta.dirname, "..", "fixtures", "user-task"),
    join(import.meta.dirname, "..", "fixtures", "service-task"),
    join(import.meta.dirname, "..", "..", "..", "packages", "harbor", "fixtures", "two-steps"),
  ]);
}, 600_000);
afterAll(() => stack?.stop());

function post(body: Record<string, unknown>, app = stack.app) {
  return app.request("/v1/rollouts", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ taskId: TASK, harness: "pi", model: "scripted-model", ...body }),
  });
}

async function rollout(rolloutId: string, body: Record<string, unknown> = {}) {
  const res = await post({ rolloutId, agentTimeoutSec: 120, ...body });
  expect(res.status, await res.clone().text()).toBe(200);
  if (process.env.DEBUG_ROLLOUT) console.log(await res.clone().text());
  return RolloutResult.parse(await res.json());
}

async function upstreamRequests(): Promise<number> {
  const res = await fetch(`${stack.upstreamUrl}/_scripted/requests`);
  return ((await res.json()) as unknown[]).length;
}

async function guardRecords(sessionId: string) {
  const res = await fetch(`${stack.guardUrl}/admin/sessions/${sessionId}/trajectory`, {
    headers: guardAdminHeaders,
  });
  return ((await res.json()) as { records: { error: string | null; response: unknown }[] }).records;
}

/** An environment failure is excluded from training: no correctness and no reward, never a zero. */
function expectEnvironmentFailure(result: RolloutResult, stage: string, reason: RegExp) {
  expect(result.environmentFailure?.stage).toBe(stage);
  expect(result.environmentFailure?.reason).toMatch(reason);
  expect(result.correctness).toBeNull();
  expect(result.reward).toBeNull();
}

describe("pi rollouts that fail for the environment (scripted upstream model: a test double)", () => {
  it("the model endpoint answers only errors: pi gives up, an environment failure", async () => {
    await stack.script([{ error: { status: 500, message: "scripted model server fault" } }]);
    const result = await rollout("upstream-errors");
    expectEnvironmentFailure(result, "harness", /502 model server error 500: scripted model server fault/);
    expect(result.stopReason).toBe("error");
    // pi retried before giving up; each try reached the model server through the guard.
    expect(await upstreamRequests()).toBeGreaterThan(1);
    expect(result.toolCalls.guard).toBe(0);
  });

  it("the harness process is killed mid-run: an environment failure, not a zero", async () => {
    await stack.script([{ tool_calls: [run("kill -9 $PPID")] }, { text: "unreachable" }]);
    const result = await rollout("killed");
    expectEnvironmentFailure(result, "harness", /exit|killed|signal|no assistant/i);
    expect(result.toolCalls.guard).toBe(1);
  });

  it("the harness hangs past its agent timeout: killed on time, an environment failure", async () => {
    await stack.script([{ text: "thinking very slowly ".repeat(8), chunk_chars: 4, delay_ms: 20_000 }]);
    const started = performance.now();
    const result = await rollout("hangs", { agentTimeoutSec: 3 });
    expectEnvironmentFailure(result, "harness", /past its 3s timeout/);
    expect(result.stopReason).toBe("timeout");
    expect(result.durationsMs.harness).toBeLessThan(15_000);
    expect(performance.now() - started).toBeLessThan(30_000);
    // The call cut short by the kill is in the trajectory, and the session takes no more calls.
    const records = await guardRecords(result.refs.guardSession!);
    expect(records.map((r) => r.error)).toEqual(["the harness closed the connection"]);
    const session = await fetch(`${stack.guardUrl}/admin/sessions/${result.refs.guardSession}`, {
      headers: guardAdminHeaders,
    });
    expect(SessionView.parse(await session.json()).endedAt).toBeDefined();
  });

  it("a blocked call, then the harness is killed: it scores 0, never an excluded environment failure", async () => {
    await stack.script([
      { tool_calls: [run("cat /solution/solve.sh"), run("kill -9 $PPID")] },
      { text: "unreachable" },
    ]);
    const result = await rollout("blocked-then-killed");
    expect(result.blocked.map((b) => b.rule)).toEqual(["answer-retrieval"]);
    expect(result.environmentFailure).toBeNull();
    expect(result.correctness).toBe(0);
    expect(result.reward).toBe(0);
    expect(result.failedAfterBlock?.stage).toBe("harness");
  });
});

describe("requests the runner refuses", () => {
  it("an unknown harness is a 400 naming body.harness", async () => {
    const res = await post({ harness: "no-such-harness" });
    expect(res.status).toBe(400);
    const body = ErrorBody.parse(await res.json());
    expect(body.error.code).toBe("unknown_harness");
    expect(body.error.issues?.[0]?.path).toBe("body.harness");
  });

  it("an unknown task is a 404", async () => {
    const res = await post({ taskId: "no-such-task" });
    expect(res.status).toBe(404);
    expect(ErrorBody.parse(await res.json()).error.code).toBe("unknown_task");
  });

  it("bad fields are a 400 with their paths", async () => {
    const res = await post({ maxTurns: 0, contextWindow: "big" });
    expect(res.status).toBe(400);
    const paths = ErrorBody.parse(await res.json()).error.issues?.map((i) => i.path);
    expect(paths).toEqual(expect.arrayContaining(["body.maxTurns", "body.contextWindow"]));
  });
});

/** Processes whose command line names `folder` (a sandbox's bwrap), with all they started. */
function processesUnder(folder: string): number[] {
  const roots = readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(folder);
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);
  const children = (pid: number): number[] => {
    try {
      return readdirSync(`/proc/${pid}/task`).flatMap((tid) =>
        readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").split(" ").filter(Boolean).map(Number),
      );
    } catch {
      return [];
    }
  };
  const all = new Set<number>();
  const visit = (pid: number) => {
    if (all.has(pid)) return;
    all.add(pid);
    for (const child of children(pid)) visit(child);
  };
  for (const pid of roots) visit(pid);
  return [...all];
}

/** Still running: a zombie (dead, waiting for its new parent to reap it) runs nothing. */
function alive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] !== "Z";
  } catch {
    return false;
  }
}

describe("a rollout cancelled while it runs", () => {
  it("kills the harness, removes its sandbox and stores nothing; its POST answers 409", async () => {
    await stack.script([{ text: "thinking very slowly ".repeat(8), chunk_chars: 4, delay_ms: 60_000 }]);
    const before = await upstreamRequests();
    const attempt = (n: number) => ({ "content-type": "application/json", "x-bridle-attempt": String(n) });
    const body = JSON.stringify({
      taskId: TASK,
      harness: "pi",
      model: "scripted-model",
      rolloutId: "cancelled",
      agentTimeoutSec: 300,
    });
    const pending = stack.app.request("/v1/rollouts", { method: "POST", headers: attempt(1), body });
    // The harness runs once its first model call has reached the (slow) model server.
    const deadline = Date.now() + 120_000;
    while ((await upstreamRequests()) === before && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 250));
    const sandboxes = join(stack.dataDir, "sandboxes");
    const running = processesUnder(sandboxes);
    expect(running.length).toBeGreaterThan(1); // bwrap and the harness inside it, at least
    expect(readdirSync(sandboxes).length).toBeGreaterThan(0);

    // The activity's attempt 1 timed out and its retry (attempt 2) took the rollout over: the
    // stale attempt's cancel must not stop it.
    const retry = stack.app.request("/v1/rollouts", { method: "POST", headers: attempt(2), body });
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // its request reaches the scheduler
    const stale = await stack.app.request("/v1/rollouts/cancelled", {
      method: "DELETE",
      headers: attempt(1),
    });
    expect(stale.status).toBe(409);
    expect(ErrorBody.parse(await stale.json()).error.code).toBe("superseded");
    expect(running.filter(alive).length).toBeGreaterThan(1);

    const started = performance.now();
    const cancel = await stack.app.request("/v1/rollouts/cancelled", {
      method: "DELETE",
      headers: attempt(2),
    });
    expect(cancel.status, await cancel.clone().text()).toBe(202);
    for (const res of await Promise.all([pending, retry])) {
      expect(res.status).toBe(409);
      expect(ErrorBody.parse(await res.json()).error.code).toBe("rollout_cancelled");
    }
    expect(performance.now() - started).toBeLessThan(30_000);
    expect(running.filter(alive)).toEqual([]);
    expect(processesUnder(sandboxes).filter(alive)).toEqual([]);
    expect(readdirSync(sandboxes)).toEqual([]);
    // Nothing was stored: the id runs anew when asked again, and there is nothing left to cancel.
    expect((await stack.app.request("/v1/rollouts/cancelled")).status).toBe(404);
    expect((await stack.app.request("/v1/rollouts/cancelled", { method: "DELETE" })).status).toBe(404);
  });
});

describe("a rollout id runs once", () => {
  it("a finished rollout id returns its stored result without running again", async () => {
    await stack.script(solved);
    const first = await rollout("once");
    expect(first.environmentFailure).toBeNull();
    expect(first.correctness).toBe(0);
    const calls = await upstreamRequests();
    const again = await rollout("once");
    expect(again).toEqual(first);
    expect(await upstreamRequests()).toBe(calls);
    const stored = await stack.app.request("/v1/rollouts/once");
    expect(RolloutResult.parse(await stored.json())).toEqual(first);
  });
});

describe("a submitted rollout (?wait=false), polled to its end", () => {
  const submit = (body: Record<string, unknown>) =>
    stack.app.request("/v1/rollouts?wait=false", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ taskId: TASK, harness: "pi", model: "scripted-model", ...body }),
    });
  const state = async (id: string) => {
    const res = await stack.app.request(`/v1/rollouts/${id}/state`);
    return { status: res.status, body: res.status === 200 ? RolloutState.parse(await res.json()) : null };
  };
  const settled = async (id: string) => {
    for (const deadline = Date.now() + 120_000; Date.now() < deadline; ) {
      const now = await state(id);
      if (now.body?.state !== "running") return now;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    throw new Error(`rollout ${id} still running`);
  };

  it("answers at once, then its state: running, then done with the result, which is stored", async () => {
    await stack.script(solved);
    const res = await submit({ rolloutId: "submitted", agentTimeoutSec: 120 });
    expect(res.status).toBe(202);
    expect(RolloutState.parse(await res.json())).toMatchObject({ state: "running", rolloutId: "submitted" });
    const done = await settled("submitted");
    expect(done.body).toMatchObject({
      state: "done",
      result: { rolloutId: "submitted", environmentFailure: null },
    });
    // Submitted again, the stored result answers at once.
    expect(RolloutState.parse(await (await submit({ rolloutId: "submitted" })).json()).state).toBe("done");
    expect((await stack.app.request("/v1/rollouts/submitted")).status).toBe(200);
  });

  it("a cancelled one ends failed with rollout_cancelled; an unknown id is a 404; an id is required", async () => {
    await stack.script([{ text: "thinking very slowly ".repeat(8), chunk_chars: 4, delay_ms: 60_000 }]);
    const before = await upstreamRequests();
    expect((await submit({ rolloutId: "submitted-cancel", agentTimeoutSec: 300 })).status).toBe(202);
    for (
      const deadline = Date.now() + 120_000;
      (await upstreamRequests()) === before && Date.now() < deadline;
    )
      await new Promise((resolve) => setTimeout(resolve, 250));
    expect((await state("submitted-cancel")).body?.state).toBe("running");
    const cancel = await stack.app.request("/v1/rollouts/submitted-cancel", { method: "DELETE" });
    expect(cancel.status).toBe(202);
    expect((await settled("submitted-cancel")).body).toMatchObject({
      state: "failed",
      error: { status: 409, code: "rollout_cancelled", retryable: false },
    });
    expect((await state("no-such-rollout")).status).toBe(404);
    const anonymous = await submit({});
    expect(anonymous.status).toBe(400);
    expect(ErrorBody.parse(await anonymous.json()).error.issues?.[0]?.path).toBe("body.rolloutId");
  });
});

describe("a task's own guard rules reach the guard session of its rollouts", () => {
  it("task.toml [guard]: its plugin blocks a call and the rollout scores 0; its allowed host passes", async () => {
    await stack.script([
      {
        tool_calls: [
          run("pip install requests"),
          run("curl -s --max-time 1 https://pypi.org/simple/ || true"),
          run("echo 42 > answer.txt"),
        ],
      },
      { text: "Done." },
    ]);
    const res = await stack.app.request("/v1/rollouts", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        rolloutId: "plugin",
        taskId: "offline-answer",
        harness: "pi",
        model: "scripted-model",
      }),
    });
    const result = RolloutResult.parse(await res.json());
    expect(result.blocked.map((b) => b.rule)).toEqual(["task-plugin:offline"]);
    expect(result.blocked[0]!.notice).toContain("this task is solved without installing packages");
    expect(result.correctness).toBe(1); // the answer is right, but a blocked call always scores 0
    expect(result.reward).toBe(0);
    expect(result.toolCalls.guard).toBe(2);
  });

  it("a task with a workdir of its own: the harness starts there and the verifier checks there", async () => {
    await stack.script([{ tool_calls: [run("pwd > where.txt")] }, { text: "Done." }]);
    const res = await stack.app.request("/v1/rollouts", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        rolloutId: "own-workdir",
        taskId: "own-workdir",
        harness: "pi",
        model: "scripted-model",
      }),
    });
    const result = RolloutResult.parse(await res.json());
    expect(result.environmentFailure).toBeNull();
    expect(result.correctness).toBe(1);
  });
});

describe("a task's env tables ([environment.env], [agent.env], [verifier.env])", () => {
  it("reach the harness's commands and the tests, each phase its own, and never override the harness's settings", async () => {
    await stack.script([
      { tool_calls: [run('echo "$SHARED $ROLE" > seen.txt; echo "$PI_CODING_AGENT_DIR" > dir.txt')] },
      { text: "Done." },
    ]);
    const result = await rollout("task-env", { taskId: "task-env" });
    expect(result.environmentFailure).toBeNull();
    // seen.txt says "everyone agent", the tests saw "everyone verifier", pi kept its own folder.
    expect(result.correctness).toBe(1);
    expect(result.toolCalls.guard).toBe(1);
    // Both model calls (the command, then "Done.") are counted by how they joined the conversation.
    expect(Object.values(result.stitching).reduce((a, b) => a + b, 0)).toBe(2);
    expect(result.stitching["new-branch"]).toBe(1);
  });
});

describe("a multi-step task ([[steps]]): the harness runs per step in one sandbox, each step verified", () => {
  const steps = (rolloutId: string) =>
    stack.app.request("/v1/rollouts", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ rolloutId, taskId: "two-steps", harness: "pi", model: "scripted-model" }),
    });

  it("runs both steps on the same workspace, with the second step's workdir and setup, and scores each", async () => {
    // Each step is a new conversation, so both get the same turns: one command that does step 1's
    // work until step 2's workdir (data.txt) has arrived, and step 2's after.
    await stack.script([
      { tool_calls: [run("if [ -f data.txt ]; then cat data.txt >> out.txt; else echo one > out.txt; fi")] },
      { text: "Done." },
    ]);
    const res = await steps("two-steps-solved");
    const result = RolloutResult.parse(await res.json());
    expect(result.environmentFailure).toBeNull();
    expect(result.steps?.map((s) => [s.name, s.correctness, s.toolCalls])).toEqual([
      ["01-create", 1, 1],
      ["02-extend", 1, 1],
    ]);
    expect(result.correctness).toBe(1);
    expect(result.reward).toBeGreaterThanOrEqual(1);
    // The harness ran twice, each step a guard session (a conversation) of its own.
    expect(result.toolCalls).toEqual({ guard: 2, harness: 2 });
    expect(result.refs.stepSessions).toHaveLength(2);
    expect(result.refs.guardSession).toBe(result.refs.stepSessions![1]);
    for (const session of result.refs.stepSessions!) expect(await guardRecords(session)).toHaveLength(2);
  });

  it("a step below its min_reward ends the task: the next step never runs", async () => {
    await stack.script([{ tool_calls: [run("echo zero > out.txt")] }, { text: "Created out.txt." }]);
    const before = await upstreamRequests();
    const res = await steps("two-steps-stopped");
    const result = RolloutResult.parse(await res.json());
    expect(result.environmentFailure).toBeNull();
    expect(result.steps?.map((s) => [s.name, s.correctness])).toEqual([["01-create", 0]]);
    expect(result.steps?.[0]?.message).toMatch(/the task ends here: reward = 0, below min_reward 1/);
    expect(result.correctness).toBe(0);
    expect(result.reward).toBe(0);
    expect((await upstreamRequests()) - before).toBe(2);
  });
});

describe("a task whose environment is a Dockerfile (built on podman)", () => {
  it("runs the harness on the image and verifies on it with the agent's changes outside the workspace", async () => {
    await stack.script([
      {
        tool_calls: [
          run("cp /etc/build-id build.txt && echo tuned > /etc/agent.conf && pwd && echo $TASK_MODE"),
        ],
      },
      { text: "Done." },
    ]);
    const result = await rollout("image-task", { taskId: "image-task" });
    expect(result.environmentFailure).toBeNull();
    expect(result.toolCalls.guard).toBe(1);
    expect(result.correctness).toBe(1);
    // Workspace and image changes went to the verifier by reference, and were released once it answered.
    expect(readdirSync(join(stack.dataDir, "artifacts"))).toEqual([]);
  });

  it("runs the harness as the task's agent user ([agent] user), and the tests as root", async () => {
    await stack.script([{ tool_calls: [run("whoami > whoami.txt && id -u")] }, { text: "Done." }]);
    const result = await rollout("user-task", { taskId: "user-task" });
    expect(result.environmentFailure).toBeNull();
    expect(result.toolCalls.guard).toBe(1);
    expect(result.correctness).toBe(1);
  });

  it("starts the task's service beside the harness and again beside the tests, on a network of their own", async () => {
    await stack.script([
      {
        tool_calls: [
          run(
            "python3 -c \"import urllib.request; open('word.txt', 'w').write(urllib.request.urlopen('http://notes:8080/word.txt').read().decode())\"",
          ),
        ],
      },
      { text: "Done." },
    ]);
    const result = await rollout("service-task", { taskId: "service-task" });
    expect(result.environmentFailure).toBeNull();
    // The call reached the service by name (its word is nowhere else), and the tests' own request
    // reached a fresh one beside them.
    expect(result.blocked).toEqual([]);
    expect(result.correctness).toBe(1);
    // Nothing of either is left: no sandbox folder, no namespace holder.
    expect(readdirSync(join(stack.dataDir, "sandboxes"))).toEqual([]);
    const holders = readdirSync("/proc").filter(
      (pid) =>
        /^\d+$/.test(pid) &&
        (() => {
          try {
            return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("--info-fd");
          } catch {
            return false; // gone meanwhile
          }
        })(),
    );
    expect(holders).toEqual([]);
  });

  it("runs on a host that has not built the image: the runner fetches it from the tasks service", async () => {
    const other = stack.otherHostRunner();
    await stack.script([
      { tool_calls: [run("cp /etc/build-id build.txt && echo tuned > /etc/agent.conf")] },
      { text: "Done." },
    ]);
    const res = await post(
      { rolloutId: "image-task-elsewhere", taskId: "image-task", agentTimeoutSec: 120 },
      other.app,
    );
    expect(res.status, await res.clone().text()).toBe(200);
    const result = RolloutResult.parse(await res.json());
    expect(result.environmentFailure).toBeNull();
    expect(result.correctness).toBe(1);
    // The image now lies in the other host's own home, under the digest the tasks service built.
    const [digest, ...more] = readdirSync(join(other.imagesHome, "images"));
    expect(more).toEqual([]);
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    expect(readFileSync(join(other.imagesHome, "images", digest!, "rootfs", "etc", "build-id"), "utf8")).toBe(
      readFileSync(
        join(loadStackConfig().home, "containers", "images", digest!, "rootfs", "etc", "build-id"),
        "utf8",
      ),
    );
  }, 300_000);
});

describe("the agent cannot reach the control plane", () => {
  it("the guard's admin API answers 401 from inside the sandbox, to a read and to a new session", async () => {
    // The one door out of the sandbox leads to the guard's port; the admin routes behind it need a
    // token the sandbox never holds. (A script reads the address from the environment, so no host
    // is named for the guard's host rule to refuse: the call really runs.)
    const probe = [
      "python3 - <<'PY'",
      "import os, urllib.request as r, urllib.error as e",
      "base = os.environ['BRIDLE_GUARD_URL'] + '/admin/sessions'",
      'for data in (None, b\'{"instruction": "x", "adapter": "a", "mode": "off"}\'):',
      "    try:",
      "        print('ADMIN', r.urlopen(r.Request(base, data=data, headers={'content-type': 'application/json'})).status)",
      "    except e.HTTPError as x:",
      "        print('ADMIN', x.code)",
      "PY",
    ].join("\n");
    await stack.script([{ tool_calls: [run(probe)] }, { text: "Done." }]);
    const result = await rollout("admin-probe");
    expect(result.blocked).toEqual([]);
    expect(result.toolCalls.guard).toBe(1);
    const requests = (await (await fetch(`${stack.upstreamUrl}/_scripted/requests`)).json()) as {
      messages?: { role: string; content: unknown }[];
    }[];
    const toolResults = requests
      .flatMap((r) => r.messages ?? [])
      .filter((m) => m.role === "tool")
      .map((m) => JSON.stringify(m.content));
    expect(
      toolResults.some((c) => /ADMIN 401.*ADMIN 401/s.test(c)),
      toolResults.join("\n"),
    ).toBe(true);
  });
});

// Each of these takes a process down for good, so they run last, in this order.
describe("a harness version whose conformance check failed", () => {
  it("is refused for training, naming the failed property; evaluation rollouts still run it", async () => {
    const pi = harnesses.pi!;
    const check: HarnessCheck = {
      harness: "pi",
      version: pi.version,
      checkedAt: "2026-12-01T00:00:00.000Z",
      contextWindow: 1024,
      passed: false,
      properties: [
        { name: "completes", passed: true, detail: "correctness 1 after 4 tool calls" },
        { name: "prefix", passed: false, detail: "model call #4 starts a new branch (compaction)" },
      ],
      streaming: true,
      usage: true,
      stitching: { "token-ids": 2, messages: 0, "new-branch": 3 },
    };
    mkdirSync(stack.harnessChecksDir, { recursive: true });
    const file = join(stack.harnessChecksDir, `pi@${pi.version}.json`);
    writeFileSync(file, JSON.stringify(check));
    try {
      const refused = await post({ rolloutId: "checked-train", capture: true });
      expect(refused.status).toBe(409);
      const error = ErrorBody.parse(await refused.json()).error;
      expect(error.code).toBe("harness_check_failed");
      expect(error.message).toMatch(/pi .* failed its conformance check/);
      expect(error.message).toMatch(/prefix: model call #4 starts a new branch/);
      const listed = await (await stack.app.request("/v1/rollouts/harnesses/list")).json();
      expect(listed).toContainEqual(
        expect.objectContaining({
          name: "pi",
          check: expect.objectContaining({ passed: false, failed: ["prefix"] }),
        }),
      );

      await stack.script(solved);
      const evaluated = await rollout("checked-eval", { capture: false });
      expect(evaluated.environmentFailure).toBeNull();
    } finally {
      rmSync(file, { force: true });
    }
  });
});

describe("services going down", () => {
  it("the verifier down after the harness ran: a retryable 503, nothing stored", async () => {
    await stack.kill("verifier");
    await stack.script(solved);
    const res = await post({ rolloutId: "verifier-down" });
    expect(res.status).toBe(503);
    const body = ErrorBody.parse(await res.json());
    expect(body.error.retryable).toBe(true);
    expect(body.error.message).toMatch(/verifier/);
    expect((await stack.app.request("/v1/rollouts/verifier-down")).status).toBe(404);
  });

  it("the model server goes down mid-rollout: the guard answers 503 and it is an environment failure", async () => {
    await stack.script([{ tool_calls: [run("sleep 6")] }, { text: "never served" }]);
    const pending = rollout("model-server-down");
    const deadline = Date.now() + 60_000;
    while ((await upstreamRequests()) < 1 && Date.now() < deadline) await sleep(100);
    // The first turn is served within a second and pi then runs `sleep 6`: take the model server away.
    await sleep(2_000);
    await stack.kill("upstream");
    const result = await pending;
    expectEnvironmentFailure(result, "harness", /503/);
    expect(result.toolCalls.guard).toBe(1);
    const records = await guardRecords(result.refs.guardSession!);
    // The answered call, then the harness's retries the guard could not serve, each recorded as such.
    expect(records[0]!.error).toBeNull();
    expect(records.length).toBeGreaterThan(1);
    for (const r of records.slice(1)) {
      expect(r.response).toBeNull();
      expect(r.error).toMatch(/model server unreachable/);
    }
  });

  it("the guard down: a retryable 503", async () => {
    await stack.kill("guard");
    const res = await post({ rolloutId: "guard-down" });
    expect(res.status).toBe(503);
    const body = ErrorBody.parse(await res.json());
    expect(body.error.retryable).toBe(true);
    expect(body.error.message).toMatch(/guard/);
  });

  it("the tasks service down: a retryable 503", async () => {
    await stack.kill("tasks");
    const res = await post({ rolloutId: "tasks-down" });
    expect(res.status).toBe(503);
    const body = ErrorBody.parse(await res.json());
    expect(body.error.retryable).toBe(true);
    expect(body.error.message).toMatch(/tasks/);
  });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
