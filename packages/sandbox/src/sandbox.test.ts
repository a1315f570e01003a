import { mkdir, mkdtemp, readFile, rm, stat, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { missingTools, Sandbox, WORKSPACE, workdirProblem } from "./index.ts";

let host: string;
beforeAll(async () => {
  host = await mkdtemp(join(tmpdir(), "bridle-sandbox-"));
});
afterAll(async () => rm(host, { recursive: true, force: true }));

describe("Sandbox", () => {
  it("runs a command in a fresh copy of the environment, keeping modes and timestamps", async () => {
    const env = join(host, "env");
    await mkdir(env);
    await writeFile(join(env, "run.sh"), "#!/bin/sh\necho ran $1\n", { mode: 0o755 });
    const lastYear = new Date(Date.now() - 365 * 86_400_000);
    await utimes(join(env, "run.sh"), lastYear, lastYear);
    const a = await Sandbox.create({ environmentDir: env, baseDir: host });
    const b = await Sandbox.create({ environmentDir: env, baseDir: host });
    try {
      expect((await stat(join(a.workspace, "run.sh"))).mtimeMs).toBe(
        (await stat(join(env, "run.sh"))).mtimeMs,
      );
      const r = await a.run(["./run.sh", "one"], { timeoutMs: 10_000 });
      expect(r).toMatchObject({ exitCode: 0, stdout: "ran one\n", timedOut: false });
      await a.run(["bash", "-c", "echo changed > run.sh"], { timeoutMs: 10_000 });
      // Each sandbox has its own copy; the source is untouched.
      expect(await readFile(join(b.workspace, "run.sh"), "utf8")).toContain("echo ran");
      expect(await readFile(join(env, "run.sh"), "utf8")).toContain("echo ran");
    } finally {
      await a.dispose();
      await b.dispose();
    }
    await expect(stat(a.root)).rejects.toThrow(/ENOENT/);
  });

  it("shows the workspace at a task's own workdir, and starts commands there", async () => {
    const env = join(host, "env-workdir");
    await mkdir(env);
    await writeFile(join(env, "data.txt"), "in the workspace\n");
    const box = await Sandbox.create({ environmentDir: env, baseDir: host, workdir: "/workspace/project" });
    const plain = await Sandbox.create({ baseDir: host });
    try {
      const r = await box.run(
        ["bash", "-c", "pwd; cat /workspace/project/data.txt; echo made > out.txt; ls /app 2>&1"],
        {
          timeoutMs: 10_000,
        },
      );
      expect(r.stdout).toMatch(/^\/workspace\/project\nin the workspace\n.*No such file or directory/s);
      expect(await readFile(join(box.workspace, "out.txt"), "utf8")).toBe("made\n");
      expect(plain.workdir).toBe(WORKSPACE);
      expect((await plain.run(["pwd"], { timeoutMs: 10_000 })).stdout).toBe(`${WORKSPACE}\n`);
      await expect(
        box.run(["true"], { timeoutMs: 10_000, mounts: [{ source: env, target: "/workspace/project/lib" }] }),
      ).rejects.toThrow(/overlap/);
    } finally {
      await box.dispose();
      await plain.dispose();
    }
  });

  it("refuses a workdir that would hide the system or Bridle's own mounts, naming why", async () => {
    expect(workdirProblem("/workspace")).toBeNull();
    expect(workdirProblem("/srv/app-1")).toBeNull();
    expect(workdirProblem("app")).toMatch(/not an absolute path/);
    expect(workdirProblem("/app/../etc")).toMatch(/not a normalised path/);
    expect(workdirProblem("/app/")).toMatch(/not a normalised path \(write "\/app"\)/);
    expect(workdirProblem("/")).toMatch(/hide the system/);
    expect(workdirProblem("/usr/src/app")).toMatch(/under \/usr/);
    expect(workdirProblem("/tests")).toMatch(/is \/tests/);
    expect(workdirProblem("/home/agent/x")).toMatch(/under \/home\/agent/);
    expect(workdirProblem("/my app")).toMatch(/characters/);
    await expect(Sandbox.create({ baseDir: host, workdir: "/etc" })).rejects.toThrow(/is \/etc/);
  });

  it("passes only the variables it is given; nothing leaks from the host", async () => {
    process.env.BRIDLE_SANDBOX_LEAK = "leaked";
    const s = await Sandbox.create({ baseDir: host });
    try {
      const r = await s.run(["bash", "-c", 'echo "[$BRIDLE_SANDBOX_LEAK][$MINE][$HOME][$PWD]"'], {
        timeoutMs: 10_000,
        env: { MINE: "mine" },
      });
      expect(r.stdout).toBe("[][mine][/tmp][/app]\n");
    } finally {
      delete process.env.BRIDLE_SANDBOX_LEAK;
      await s.dispose();
    }
  });

  it("extracts an archive of another owner's files, as root can only do here without its owners", async () => {
    const s = await Sandbox.create({ baseDir: host });
    try {
      const r = await s.run(
        [
          "bash",
          "-c",
          "mkdir d && echo x > d/f && tar --owner=1234 -cf t.tar d && rm -r d && tar -xf t.tar && cat d/f",
        ],
        { timeoutMs: 10_000 },
      );
      expect(r).toMatchObject({ exitCode: 0, stdout: "x\n", stderr: "" });
    } finally {
      await s.dispose();
    }
  });

  it("reports exit codes, stderr, stdin and a missing command", async () => {
    const s = await Sandbox.create({ baseDir: host });
    try {
      const r = await s.run(["bash", "-c", "read x; echo got $x; echo oops >&2; exit 3"], {
        timeoutMs: 10_000,
        stdin: "input\n",
      });
      expect(r).toMatchObject({ exitCode: 3, stdout: "got input\n", stderr: "oops\n" });
      const deaf = await s.run(["true"], { timeoutMs: 10_000, stdin: "x".repeat(1_000_000) });
      expect(deaf.exitCode).toBe(0);
      const missing = await s.run(["no-such-command-here"], { timeoutMs: 10_000 });
      expect(missing.exitCode).not.toBe(0);
      expect(missing.stderr).toMatch(/no-such-command-here/);
    } finally {
      await s.dispose();
    }
  });

  it("kills a run past its timeout and says so", async () => {
    const s = await Sandbox.create({ baseDir: host });
    try {
      const r = await s.run(["sleep", "30"], { timeoutMs: 300 });
      expect(r.timedOut).toBe(true);
      expect(r.durationMs).toBeLessThan(10_000);
    } finally {
      await s.dispose();
    }
  });

  it("names what a command left running when asked: the run still ends every process", async () => {
    const s = await Sandbox.create({ baseDir: host });
    try {
      const left = await s.run(["sh", "-c", "sleep 60 & (sleep 61 &); sh -c 'exit 0'; echo done"], {
        timeoutMs: 30_000,
        reportLeftRunning: true,
      });
      expect(left).toMatchObject({ exitCode: 0, stdout: "done\n", leftRunning: ["sleep"] });
      expect(left.durationMs).toBeLessThan(20_000);
      // What ran to its end is not named; the command's status is kept.
      const clean = await s.run(["sh", "-c", "sleep 0.1; exit 3"], {
        timeoutMs: 30_000,
        reportLeftRunning: true,
      });
      expect(clean).toMatchObject({ exitCode: 3, leftRunning: [] });
      // Not asked: not reported.
      expect((await s.run(["true"], { timeoutMs: 30_000 })).leftRunning).toBeUndefined();
    } finally {
      await s.dispose();
    }
  });

  it("stops a run when its signal aborts: every process of it, children included", async () => {
    const s = await Sandbox.create({ baseDir: host });
    try {
      const stop = new AbortController();
      const run = s.run(["sh", "-c", "sleep 60 & sleep 60 & echo started; wait"], {
        timeoutMs: 60_000,
        signal: stop.signal,
      });
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      stop.abort();
      const r = await run;
      expect(r).toMatchObject({ cancelled: true, timedOut: false });
      expect(r.durationMs).toBeLessThan(20_000);
      const before = new AbortController();
      before.abort();
      const never = await s.run(["sh", "-c", "echo ran"], { timeoutMs: 10_000, signal: before.signal });
      expect(never.cancelled).toBe(true);
      expect(never.stdout).toBe("");
    } finally {
      await s.dispose();
    }
  });

  it("enforces the memory limit", async () => {
    const s = await Sandbox.create({ baseDir: host });
    try {
      const r = await s.run(["python3", "-c", "b = bytearray(400 * 1024 * 1024); print('allocated')"], {
        timeoutMs: 20_000,
        memoryMb: 64,
      });
      expect(r.stdout).not.toContain("allocated");
      expect(r.exitCode).not.toBe(0);
      expect(r.oomKilled || /MemoryError/.test(r.stderr)).toBe(true);
      const ok = await s.run(["python3", "-c", "b = bytearray(8 * 1024 * 1024); print('allocated')"], {
        timeoutMs: 20_000,
        memoryMb: 64,
      });
      expect(ok.stdout).toBe("allocated\n");
    } finally {
      await s.dispose();
    }
  });

  it("enforces a CPU quota", async () => {
    const s = await Sandbox.create({ baseDir: host });
    try {
      const burn =
        "import time\nend = time.monotonic() + 1.5\nwhile time.monotonic() < end: pass\nprint(round(time.process_time(), 2))";
      const r = await s.run(["python3", "-c", burn], { timeoutMs: 20_000, cpus: 0.2 });
      // 1.5 s of wall time at a fifth of a core: about 0.3 s of CPU, never the whole 1.5 s.
      expect(Number(r.stdout)).toBeLessThan(0.6);
    } finally {
      await s.dispose();
    }
  });

  it("keeps only the tail of a flood of output", async () => {
    const s = await Sandbox.create({ baseDir: host });
    try {
      const r = await s.run(["bash", "-c", "yes line | head -c 1000000; echo END"], {
        timeoutMs: 10_000,
        maxOutputBytes: 1_000,
      });
      expect(r.stdout.length).toBeLessThanOrEqual(1_000);
      expect(r.stdout.endsWith("END\n")).toBe(true);
    } finally {
      await s.dispose();
    }
  });

  it("names the host tools a task needs that the sandbox lacks", () => {
    expect(missingTools(["bash", "python3", "node", "git"])).toEqual([]);
    expect(missingTools(["bash", "no-such-tool-xyz"])).toEqual(["no-such-tool-xyz"]);
  });
});
