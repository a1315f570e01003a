import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NO_SOLUTION, phaseEnv, validateFolder, validateTask } from "./index.ts";

const suite = resolve(dirname(fileURLToPath(import.meta.url)), "../../../tasks");
let dir: string;

/** A copy of a good bundled task, broken in one way. */
async function broken(name: string, change: (taskDir: string) => Promise<void>): Promise<string> {
  const taskDir = join(dir, name);
  await cp(join(suite, "repair-median"), taskDir, { recursive: true });
  await change(taskDir);
  return taskDir;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "bridle-controls-"));
  await broken("wrong-solution", (d) => writeFile(join(d, "solution/solve.sh"), "echo 'I give up'\n"));
  await broken("no-solution", (d) => rm(join(d, "solution"), { recursive: true }));
  // Tests that fail the way pytest reports it: a short summary naming the test and the error.
  await broken("pytest-summary", (d) =>
    writeFile(
      join(d, "tests/test.sh"),
      [
        "mkdir -p /logs/verifier",
        "echo 'tests/test_outputs.py::test_binary_exists FAILED'",
        "echo '=========================== short test summary info ============================'",
        "echo \"FAILED tests/test_outputs.py::test_binary_exists - FileNotFoundError: [Errno 2] No such file or directory: 'file'\"",
        "echo '========================= 1 failed, 15 passed in 0.16s ========================='",
        "echo 0 > /logs/verifier/reward.txt",
        "",
      ].join("\n"),
    ),
  );
  // A solution that starts a server in the background, and tests that need it still running.
  await broken("daemon-solution", async (d) => {
    const solve = await readFile(join(d, "solution/solve.sh"), "utf8");
    await writeFile(join(d, "solution/solve.sh"), `${solve}(sleep 600 &)\n`);
    await writeFile(
      join(d, "tests/test.sh"),
      "mkdir -p /logs/verifier\nif grep -qs '^sleep' /proc/[0-9]*/comm; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n",
    );
  });
  // A solution that downloads what it needs: the sandbox has no network.
  await broken("offline-solution", (d) =>
    writeFile(
      join(d, "solution/solve.sh"),
      "set -e\npython3 -c 'import urllib.request; urllib.request.urlopen(\"https://pypi.org/simple/\")'\n",
    ),
  );
  // Tests that run a tool the environment does not have, from the shell and from Python.
  await broken("absent-tool", (d) =>
    writeFile(
      join(d, "tests/test.sh"),
      "mkdir -p /logs/verifier\nbridle-absent-tool --version\npython3 -c \"import subprocess; subprocess.run(['bridle-other-tool', 'x'])\" && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
    ),
  );
  // A verifier that scores a coin flip: every single run looks like a well-formed reward.
  await broken("coin-flip", (d) =>
    writeFile(
      join(d, "tests/test.sh"),
      "mkdir -p /logs/verifier\nif [ $(od -An -N1 -tu1 /dev/urandom) -lt 128 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n",
    ),
  );
  await broken("free-reward", (d) =>
    writeFile(join(d, "tests/test.sh"), "mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n"),
  );
  await broken("bad-toml-syntax", (d) =>
    writeFile(join(d, "task.toml"), 'version = "1.0"\n[metadata\ncategory = "repair"\n'),
  );
  await broken("bad-toml-field", (d) =>
    writeFile(join(d, "task.toml"), '[metadata]\ncategory = 3\n[verifier]\ntimeout_sec = "soon"\n'),
  );
  await broken("no-tests", (d) => rm(join(d, "tests"), { recursive: true }));
  await broken("missing-tool", (d) =>
    writeFile(
      join(d, "task.toml"),
      '[metadata]\ncategory = "repair"\n[environment]\nrequires = ["no-such-tool-zz"]\n',
    ),
  );
  await broken("silent-tests", (d) => writeFile(join(d, "tests/test.sh"), "echo checked\n"));
  await broken("slow-tests", (d) =>
    writeFile(join(d, "task.toml"), '[metadata]\ncategory = "repair"\n[verifier]\ntimeout_sec = 1\n').then(
      () => writeFile(join(d, "tests/test.sh"), "sleep 30\n"),
    ),
  );
  // Harbor's env tables: [environment.env] for every phase, each phase's own table over it.
  await broken("phase-env", async (d) => {
    await writeFile(
      join(d, "task.toml"),
      '[metadata]\ncategory = "repair"\n[environment.env]\nSHARED = "everyone"\nROLE = "none"\n[agent.env]\nROLE = "agent"\n[verifier.env]\nROLE = "verifier"\n',
    );
    await writeFile(join(d, "solution/solve.sh"), 'echo "$SHARED $ROLE" > /app/seen-by-solution\n');
    await writeFile(
      join(d, "tests/test.sh"),
      'mkdir -p /logs/verifier; if [ "$(cat /app/seen-by-solution)" = "everyone agent" ] && [ "$SHARED $ROLE" = "everyone verifier" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n',
    );
  });
  await broken("env-token", async (d) => {
    await writeFile(
      join(d, "task.toml"),
      '[metadata]\ncategory = "repair"\n[verifier]\nenv = { TOKEN = "${BRIDLE_TEST_TASK_TOKEN}" }\n',
    );
    await writeFile(
      join(d, "tests/test.sh"),
      'mkdir -p /logs/verifier; if [ "$TOKEN" = open-sesame ] && grep -q sorted /app/stats.py; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n',
    );
  });
  // The same task in another workdir: a Dockerfile's WORKDIR, and every /app of its scripts moved.
  const moveTo = async (d: string, workdir: string) => {
    for (const file of ["solution/solve.sh", "tests/test.sh", "tests/check.py"]) {
      const text = await readFile(join(d, file), "utf8");
      await writeFile(join(d, file), text.replaceAll("/app", workdir));
    }
  };
  await broken("dockerfile-workdir", async (d) => {
    await moveTo(d, "/workspace");
    await writeFile(
      join(d, "environment/Dockerfile"),
      "FROM python:3.12-slim\nWORKDIR /workspace\nCOPY stats.py .\n",
    );
  });
  await broken("toml-workdir", async (d) => {
    await moveTo(d, "/srv/project");
    await writeFile(
      join(d, "task.toml"),
      '[metadata]\ncategory = "repair"\n[environment]\nworkdir = "/srv/project"\n',
    );
  });
  await broken("bad-workdir", (d) =>
    writeFile(
      join(d, "task.toml"),
      '[metadata]\ncategory = "repair"\n[environment]\nworkdir = "/usr/src/app"\n',
    ),
  );
  await broken("json-reward", (d) =>
    writeFile(
      join(d, "tests/test.sh"),
      'mkdir -p /logs/verifier; if grep -q sorted /app/stats.py; then r=1; else r=0; fi; echo "{\\"reward\\": $r, \\"checks\\": 4}" > /logs/verifier/reward.json\n',
    ),
  );
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

const verdictOf = async (name: string) => (await validateTask(join(dir, name))).verdict;

describe("controls catch bad tasks", () => {
  it("a wrong reference solution fails the oracle control", async () => {
    const v = await verdictOf("wrong-solution");
    expect(v.ok).toBe(false);
    // With what the tests printed last, which usually names the check that failed.
    expect(v.problems).toHaveLength(1);
    expect(v.problems[0]).toMatch(
      /^oracle scored 0, expected 1: the reference solution does not pass the tests \(the tests' last line: .+\)$/,
    );
    expect(v.labels).toMatchObject({
      status: "needs_repair",
      stage: "controls",
      reasonCodes: ["oracle_failed"],
    });
  });

  it("names the first test that failed, as pytest's summary gives it, beside the totals", async () => {
    const v = await verdictOf("pytest-summary");
    expect(v.problems[0]).toBe(
      "oracle scored 0, expected 1: the reference solution does not pass the tests (first failure: FAILED tests/test_outputs.py::test_binary_exists - FileNotFoundError: [Errno 2] No such file or directory: 'file'; the tests ran `file`, which the environment does not have; the tests' last line: ========================= 1 failed, 15 passed in 0.16s =========================)",
    );
  });

  it("a task without a reference solution loads, and its oracle control says it cannot run", async () => {
    // As TermiGen's environments ship: tests and an environment, no solution/.
    const v = await verdictOf("no-solution");
    expect(v.notes).toContain(
      "solution/solve.sh: absent: no reference solution, so the oracle control cannot show the task is solvable",
    );
    expect(v.ok).toBe(false);
    expect(v.problems).toEqual([NO_SOLUTION]);
    // The nop control still ran: the tests fail the untouched environment.
    expect(v.controls?.runs.find((r) => r.control === "nop")).toMatchObject({ reward: 0, passed: true });
    expect(v.labels?.reasonCodes).toEqual(["oracle_no_solution"]);
    // Unproven, not failed: a run that asks for unproven tasks may train on it.
    expect(v.controls).toMatchObject({ passed: false, unproven: true });
    expect((await verdictOf("wrong-solution")).controls).toMatchObject({ passed: false, unproven: false });
  });

  it("says when the solution left processes running that end before the tests", async () => {
    const v = await verdictOf("daemon-solution");
    expect(v.problems).toEqual([
      "oracle scored 0, expected 1: the reference solution does not pass the tests (solution/solve.sh left sleep running: the tests run in a fresh sandbox on the files the agent phase changed, not beside its processes as in Harbor's live container, so tests that need them fail here)",
    ]);
    // A solution that leaves nothing running says nothing of it.
    expect((await verdictOf("wrong-solution")).problems[0]).not.toMatch(/running/);
  });

  it("says when the solution failed for want of the network", async () => {
    const v = await verdictOf("offline-solution");
    expect(v.problems).toHaveLength(1);
    expect(v.problems[0]).toMatch(
      /^oracle scored 0, expected 1: the reference solution does not pass the tests \(solution\/solve.sh exited 1: it reaches for the network, which the sandbox does not give: .*(name resolution|resolve).*\)/,
    );
  });

  it("names the commands the tests ran that the environment does not have", async () => {
    const v = await verdictOf("absent-tool");
    expect(v.problems[0]).toMatch(
      /^oracle scored 0, expected 1: .*the tests ran `bridle-absent-tool`, `bridle-other-tool`, which the environment does not have/,
    );
  });

  it("a verifier whose reward differs between identical runs is flagged flaky", async () => {
    // Eight runs of each control: both look steady by chance with probability (2/256)^2.
    const { verdict } = await validateTask(join(dir, "coin-flip"), { repeats: 8 });
    expect(verdict.ok).toBe(false);
    expect(verdict.controls?.repeats).toBe(8);
    expect(verdict.controls?.runs).toHaveLength(16);
    expect(verdict.controls?.flaky.length).toBeGreaterThan(0);
    const control = verdict.controls?.flaky[0];
    expect(verdict.problems).toContainEqual(
      expect.stringMatching(
        new RegExp(
          `^${control}: the verifier gave different rewards on 8 identical runs \\(([01], ){7}[01]\\)`,
        ),
      ),
    );
    expect(verdict.labels?.reasonCodes).toContain(`${control}_flaky`);
    expect(verdict.labels?.evidence).toMatch(new RegExp(`${control} #8: reward [01]`));
  });

  it("reuses controls this very content passed before, and runs them again otherwise", async () => {
    const first = await validateTask(join(dir, "json-reward"));
    expect(first.verdict.controlsReused).toBe(false);
    const passed = first.verdict.controls!;
    expect(passed.passed).toBe(true);
    const reused = await validateTask(join(dir, "json-reward"), { passedBefore: () => passed });
    expect(reused.verdict).toMatchObject({ ok: true, controlsReused: true, controls: passed });
    // Fewer runs than asked for, another content, or a failure: checked again.
    for (const before of [
      { ...passed, repeats: 1 },
      { ...passed, hash: "another" },
      { ...passed, passed: false },
    ]) {
      const again = await validateTask(join(dir, "json-reward"), { passedBefore: () => before });
      expect(again.verdict.controlsReused).toBe(false);
      expect(again.verdict.controls?.checkedAt).not.toBe(passed.checkedAt);
    }
  });

  it("runs a task in its own workdir, from task.toml or the Dockerfile's WORKDIR, and refuses one it cannot show", async () => {
    for (const name of ["dockerfile-workdir", "toml-workdir"]) {
      const { verdict } = await validateTask(join(dir, name), { repeats: 1 });
      expect(verdict.problems, name).toEqual([]);
      expect(verdict.ok, name).toBe(true);
    }
    const { verdict } = await validateTask(join(dir, "bad-workdir"), { repeats: 1 });
    expect(verdict.ok).toBe(false);
    expect(verdict.problems).toEqual([
      "task.toml: environment.workdir: workdir /usr/src/app is under /usr, which the sandbox keeps for the system or its own mounts",
    ]);
  });

  it("tests that pass without any work fail the nop control", async () => {
    const v = await verdictOf("free-reward");
    expect(v.ok).toBe(false);
    expect(v.problems).toEqual(["nop scored 1, expected 0: the tests pass without any work"]);
    expect(v.labels?.reasonCodes).toEqual(["nop_passed"]);
  });

  it("a task.toml with a syntax error names the file and the line", async () => {
    const v = await verdictOf("bad-toml-syntax");
    expect(v.ok).toBe(false);
    expect(v.controls).toBeNull();
    expect(v.problems[0]).toMatch(/^task\.toml: line 2, column \d+: /);
  });

  it("a task.toml with bad fields names each field", async () => {
    const v = await verdictOf("bad-toml-field");
    expect(v.problems.some((p) => p.startsWith("task.toml: metadata.category: "))).toBe(true);
    expect(v.problems.some((p) => p.startsWith("task.toml: verifier.timeout_sec: "))).toBe(true);
  });

  it("missing tests and missing host tools are reported by name", async () => {
    expect((await verdictOf("no-tests")).problems).toEqual(["tests/test.sh: missing (the verifier runs it)"]);
    expect((await verdictOf("missing-tool")).problems).toEqual([
      "task.toml: environment.requires: not installed on this host: no-such-tool-zz",
    ]);
  });

  it("tests that write no reward or run past their timeout are environment failures, not 0", async () => {
    const silent = await verdictOf("silent-tests");
    expect(silent.controls?.runs.map((r) => r.reward)).toEqual([null, null, null, null]);
    expect(silent.problems[0]).toMatch(/^oracle: environment failure: tests\/test\.sh wrote no/);
    expect(silent.labels?.reasonCodes).toEqual(["oracle_environment_failure", "nop_environment_failure"]);
    const slow = await verdictOf("slow-tests");
    expect(slow.problems[0]).toBe("oracle: environment failure: tests/test.sh ran past 1 s");
  });

  it("reads reward.json when there is no reward.txt", async () => {
    const v = await verdictOf("json-reward");
    expect(v.ok).toBe(true);
  });

  it("resolves a task's ${VAR} only from variables the user allows by name", async () => {
    process.env.BRIDLE_TEST_TASK_TOKEN = "open-sesame";
    try {
      const allowed = await validateTask(join(dir, "env-token"), { allowedEnv: ["BRIDLE_TEST_TASK_TOKEN"] });
      expect(allowed.verdict.controls?.runs.map((r) => [r.control, r.attempt, r.reward])).toEqual([
        ["oracle", 1, 1],
        ["oracle", 2, 1],
        ["nop", 1, 0],
        ["nop", 2, 0],
      ]);
      expect(allowed.verdict.notes).toContain(
        "task.toml: verifier.env reads ${BRIDLE_TEST_TASK_TOKEN}: from your environment, only the names in BRIDLE_TASK_ENV_ALLOW",
      );
      const refused = await verdictOf("env-token");
      expect(refused.problems[0]).toBe(
        "oracle: environment failure: task.toml: verifier.env TOKEN reads ${BRIDLE_TEST_TASK_TOKEN}, which the task may not read: allow it by name in BRIDLE_TASK_ENV_ALLOW",
      );
    } finally {
      delete process.env.BRIDLE_TEST_TASK_TOKEN;
    }
  });

  it("gives the solution (as the agent) and the tests the task's env tables, each phase its own", async () => {
    const { verdict, task } = await validateTask(join(dir, "phase-env"), { repeats: 1 });
    expect(verdict.controls?.runs.map((r) => [r.control, r.reward])).toEqual([
      ["oracle", 1],
      ["nop", 0],
    ]);
    expect(verdict.notes.filter((n) => n.includes("env"))).toEqual([]);
    expect(task && phaseEnv(task.toml)).toEqual({
      agent: { SHARED: "everyone", ROLE: "agent" },
      verifier: { SHARED: "everyone", ROLE: "verifier" },
    });
  });

  it("a folder import reports malformed tasks and carries on with the rest", async () => {
    // Another dataset's task whose folder name makes the same id, deeper down: refused by name,
    // never a silent overwrite.
    await cp(join(dir, "free-reward"), join(dir, "other-dataset", "Free-Reward"), { recursive: true });
    const verdicts = await validateFolder(dir, { parallel: 2, controls: false });
    expect(verdicts.map((v) => [v.id, v.ok])).toEqual([
      ["absent-tool", true],
      ["bad-toml-field", false],
      ["bad-toml-syntax", false],
      ["bad-workdir", false],
      ["coin-flip", true],
      ["daemon-solution", true],
      ["dockerfile-workdir", true],
      ["env-token", true],
      ["free-reward", true],
      ["json-reward", true],
      ["missing-tool", false],
      // No solution/ is no reason to refuse a task (its oracle control says it cannot run).
      ["no-solution", true],
      ["no-tests", false],
      ["offline-solution", true],
      ["free-reward", false],
      ["phase-env", true],
      ["pytest-summary", true],
      ["silent-tests", true],
      ["slow-tests", true],
      ["toml-workdir", true],
      ["wrong-solution", true],
    ]);
    expect(verdicts.find((v) => v.dir.includes("other-dataset"))?.problems).toEqual([
      `free-reward: the task id is already taken by ${join(dir, "free-reward")} (ids are made of folder names)`,
    ]);
  });
});
