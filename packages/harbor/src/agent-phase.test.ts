import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { loadTask, runTests, sandboxFor } from "./index.ts";

const suite = resolve(dirname(fileURLToPath(import.meta.url)), "../../../tasks");

async function loaded(id: string) {
  const result = await loadTask(join(suite, id));
  if (!result.ok) throw new Error(result.problems.join("; "));
  return result.task;
}

describe("the agent phase", () => {
  it("sees the workspace but neither the tests, the solution, nor the expected answer", async () => {
    const task = await loaded("qa-log-error-count");
    const sandbox = await sandboxFor(task);
    try {
      const r = await sandbox.run(
        [
          "bash",
          "-c",
          "ls /app; ls /tests /solution /logs 2>&1; find / \\( -path /proc -o -path /usr -o -path /etc \\) -prune -o \\( -name expected.txt -o -name solve.sh \\) -print",
        ],
        { timeoutMs: 30_000 },
      );
      expect(r.stdout.split("\n")[0]).toBe("app.log");
      expect(r.stdout).toContain("ls: cannot access '/tests': No such file or directory");
      expect(r.stdout).toContain("ls: cannot access '/solution': No such file or directory");
      expect(r.stdout).toContain("ls: cannot access '/logs': No such file or directory");
      expect(r.stdout).not.toContain("expected.txt");
      expect(r.stdout).not.toContain("solve.sh");
    } finally {
      await sandbox.dispose();
    }
  });

  it("cannot plant a reward for the verifier to find", async () => {
    const task = await loaded("repair-median");
    const sandbox = await sandboxFor(task);
    try {
      const agent = await sandbox.run(
        [
          "bash",
          "-c",
          "mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; echo 1 > /tmp/reward.txt; echo tried",
        ],
        { timeoutMs: 30_000 },
      );
      expect(agent.stdout).toBe("tried\n");
      expect(agent.stderr).toMatch(/Read-only file system/);
      const outcome = await runTests(sandbox, { tests: task.tests, timeoutSec: 60 });
      expect(outcome.correctness).toBe(0);
    } finally {
      await sandbox.dispose();
    }
  });
});

describe("sandboxForAgent", () => {
  it("builds the workspace from the tasks service's agent view", async () => {
    const task = await loaded("repair-median");
    const view = {
      id: task.id,
      hash: task.hash,
      category: task.category,
      instruction: task.instruction,
      agentTimeoutSec: 600,
      environment: task.environment.map((f) => ({
        path: f.path,
        mode: f.mode,
        base64: f.content.toString("base64"),
      })),
    };
    const { sandboxForAgent } = await import("./index.ts");
    const sandbox = await sandboxForAgent(view);
    try {
      const r = await sandbox.run(["python3", "-c", "import stats; print(stats.mean([1, 2]))"], {
        timeoutMs: 30_000,
      });
      expect(r.stdout).toBe("1.5\n");
    } finally {
      await sandbox.dispose();
    }
    await expect(
      sandboxForAgent({ ...view, environment: [{ path: "../escape.txt", mode: 0o644, base64: "" }] }),
    ).rejects.toThrow(/path leaves the folder/);
  });
});
