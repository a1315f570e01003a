import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot } from "@bridle/service-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Sandbox } from "./index.ts";
import { hostProcessesWith } from "./test-support.ts";

let host: string;
let sandbox: Sandbox;

const bash = (script: string, timeoutMs = 10_000, extra: Partial<Parameters<Sandbox["run"]>[1]> = {}) =>
  sandbox.run(["bash", "-c", script], { timeoutMs, ...extra });

beforeAll(async () => {
  // A task folder on the host, as the verifier holds it while the agent works.
  host = await mkdtemp(join(tmpdir(), "bridle-escape-"));
  await mkdir(join(host, "task/tests"), { recursive: true });
  await mkdir(join(host, "task/solution"), { recursive: true });
  await writeFile(join(host, "task/tests/test.sh"), "echo SECRET-TEST\n");
  await writeFile(join(host, "task/solution/solve.sh"), "echo SECRET-SOLUTION\n");
  await mkdir(join(host, "task/environment"));
  await writeFile(join(host, "task/environment/main.py"), "print('hi')\n");
  sandbox = await Sandbox.create({ environmentDir: join(host, "task/environment"), baseDir: host });
});
afterAll(async () => {
  await sandbox.dispose();
  await rm(host, { recursive: true, force: true });
});

describe("escape attempts during the agent phase", () => {
  it("cannot read the task's tests or solution, by path or by search", async () => {
    const r = await bash(
      `cat ${host}/task/tests/test.sh ${host}/task/solution/solve.sh; ls ${repoRoot}/tasks;` +
        "grep -rs SECRET- /app /tmp /run /dev | head -3;" +
        "find / \\( -path /proc -o -path /usr -o -path /etc \\) -prune -o -name solve.sh -print 2>/dev/null; echo done",
      60_000,
    );
    expect(r.stdout).not.toContain("SECRET-");
    expect(r.stdout).not.toContain("solve.sh");
    expect(r.stderr).toMatch(/No such file or directory/);
    expect(r.stdout.trim().endsWith("done")).toBe(true);
    // The workspace itself is there.
    expect((await bash("cat /app/main.py")).stdout).toBe("print('hi')\n");
  });

  it("cannot write outside the workspace; the workspace and a private /tmp are writable", async () => {
    const target = join(host, "escaped");
    const r = await bash(
      `for p in /etc/escaped /usr/escaped /escaped ${target}; do echo x > $p && echo "WROTE $p"; done;` +
        "echo ok > /tmp/private && echo ok > /app/out.txt && echo writable",
    );
    expect(r.stdout).not.toContain("WROTE");
    expect(r.stderr).toMatch(/Read-only file system|No such file or directory/);
    expect(r.stdout).toContain("writable");
    expect(existsSync(target)).toBe(false);
    expect(existsSync("/etc/escaped")).toBe(false);
    expect(existsSync("/tmp/private")).toBe(false);
    expect(await readFile(join(sandbox.workspace, "out.txt"), "utf8")).toBe("ok\n");
  });

  it("cannot see or signal host processes", async () => {
    const r = await bash(`ls /proc | grep -E '^[0-9]+$' | wc -l; kill -0 ${process.pid} && echo SIGNALLED`);
    expect(Number(r.stdout.split("\n")[0])).toBeLessThan(10);
    expect(r.stdout).not.toContain("SIGNALLED");
  });

  it("survives a fork bomb: the pids limit holds and every process is gone afterwards", async () => {
    const r = await sandbox.run(["bash", "-c", "bomb() { bomb | bomb & }; bomb; sleep 600.4242"], {
      timeoutMs: 3_000,
      maxPids: 64,
    });
    expect(r.timedOut || r.exitCode !== 0).toBe(true);
    expect(r.durationMs).toBeLessThan(30_000);
    expect(hostProcessesWith("600.4242")).toEqual([]);
  });

  it("leaves no process running after a timeout, even a detached one", async () => {
    const r = await bash(
      "setsid nohup sleep 600.1313 >/dev/null 2>&1 & (sleep 600.1313 &) ; sleep 600.1313",
      1_000,
    );
    expect(r.timedOut).toBe(true);
    expect(hostProcessesWith("600.1313")).toEqual([]);
  });

  it("leaves no process running after a normal exit either", async () => {
    const r = await bash("(setsid sleep 600.2727 &); echo started");
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toBe("started\n");
    expect(hostProcessesWith("600.2727")).toEqual([]);
  });
});
