import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findTaskDirs, loadTask, validateTask } from "./index.ts";
import { buildableImages, toolchain } from "./test-support.ts";
import { pytestFailures } from "./verify.ts";

let dir: string;
const check = { repeats: 1, toolchain };

/**
 * A task in Terminal-Bench 1's layout (task.yaml, run-tests.sh, solution.sh, tests/, Dockerfile),
 * written for this test; `change` alters one file of it.
 */
async function tb1Task(name: string, files: Record<string, string> = {}): Promise<string> {
  const task = join(dir, name);
  const all: Record<string, string> = {
    "task.yaml": [
      "instruction: |-",
      "  Write the word hello into greeting.txt in the current folder, and nothing else.",
      "author_name: Bridle",
      "author_email: tasks@bridle.invalid",
      "difficulty: easy",
      "category: file-operations",
      "tags:",
      "  - files",
      "  - shell",
      "parser_name: pytest",
      "max_agent_timeout_sec: 60",
      "max_test_timeout_sec: 20",
      "run_tests_in_same_shell: false",
      "",
    ].join("\n"),
    Dockerfile: "FROM ghcr.io/example/t-bench/python-3-13:latest\nWORKDIR /app\nCOPY notes.txt /app/\n",
    "docker-compose.yaml": "services:\n  client:\n    build: .\n",
    "notes.txt": "remember to greet\n",
    "run-tests.sh": '#!/bin/bash\npytest "$TEST_DIR/test_outputs.py" -rA\n',
    "solution.sh": "#!/bin/bash\necho hello > greeting.txt\n",
    "tests/test_outputs.py": [
      "from pathlib import Path",
      "",
      "def test_greeting_exists():",
      '    assert Path("/app/greeting.txt").exists()',
      "",
      "def test_greeting_says_hello():",
      '    assert Path("/app/greeting.txt").read_text().strip() == "hello"',
      "",
    ].join("\n"),
    ...files,
  };
  for (const [path, content] of Object.entries(all)) {
    await mkdir(join(task, path, ".."), { recursive: true });
    await writeFile(join(task, path), content);
  }
  return task;
}

beforeAll(async () => {
  if (!existsSync(join(toolchain, "bin", "pytest")))
    throw new Error(`no verifier toolchain at ${toolchain}: run the install (./bridle test does)`);
  dir = await mkdtemp(join(tmpdir(), "bridle-tb1-"));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

describe("a Terminal-Bench 1 task", () => {
  it("is read as it is: instruction, metadata and timeouts from task.yaml, the other files as the workspace", async () => {
    const folder = await tb1Task("greet");
    const loaded = await loadTask(folder);
    if (!loaded.ok) throw new Error(loaded.problems.join("; "));
    const { task } = loaded;
    expect(task.format).toBe("terminal-bench-1");
    expect(task.instruction).toBe(
      "Write the word hello into greeting.txt in the current folder, and nothing else.",
    );
    expect(task.category).toBe("file-operations");
    expect(task.toml.metadata).toMatchObject({ difficulty: "easy", tags: ["files", "shell"] });
    expect(task.toml.agent.timeout_sec).toBe(60);
    expect(task.toml.verifier.timeout_sec).toBe(20);
    expect(task.environment.map((f) => f.path)).toEqual(["notes.txt"]);
    expect(task.tests.map((f) => f.path).sort()).toEqual(["run-tests.sh", "test.sh", "test_outputs.py"]);
    expect(task.solution.map((f) => f.path)).toEqual(["solve.sh"]);
    expect(task.notes).toContain("task.yaml: kept, not used by Bridle: run_tests_in_same_shell");
    expect(task.notes).toContain(
      "docker-compose.yaml: not read: the task's Dockerfile alone makes its environment",
    );
    expect(task.dockerfile?.name).toBe("Dockerfile");
    expect(task.dockerfile?.withoutImage[0]).toMatch(/^Dockerfile: not built;/);
    expect(task.notes.some((n) => n.startsWith('task.yaml: category: "file-operations"'))).toBe(true);
    // Nothing was written into the folder: it stays a Terminal-Bench 1 task.
    expect((await readdir(folder)).sort()).toEqual([
      "Dockerfile",
      "docker-compose.yaml",
      "notes.txt",
      "run-tests.sh",
      "solution.sh",
      "task.yaml",
      "tests",
    ]);
    expect(await findTaskDirs(dir)).toContain(folder);
  });

  it("passes both controls, scored from pytest's summary the way Terminal-Bench scores it", async () => {
    await expectBothControlsPass(await tb1Task("greet-controls"));
  });

  it("scores 0 when one test of several fails", async () => {
    const { verdict } = await validateTask(
      await tb1Task("half-done", { "solution.sh": "#!/bin/bash\necho goodbye > greeting.txt\n" }),
      check,
    );
    expect(verdict.controls?.runs.map((r) => [r.control, r.reward])).toEqual([
      ["oracle", 0],
      ["nop", 0],
    ]);
  });

  it("runs solution.yaml's commands in order when there is no solution.sh", async () => {
    const folder = await tb1Task("yaml-solution", {
      "solution.yaml": "- command: echo hel > part.txt\n- command: echo hello > greeting.txt\n",
    });
    await rm(join(folder, "solution.sh"));
    const { verdict } = await validateTask(folder, check);
    expect(verdict.controls?.runs.map((r) => r.reward)).toEqual([1, 0]);
  });

  it("scores 0, as Terminal-Bench does, when run-tests.sh prints no pytest summary because the code does not build", async () => {
    // Aider-polyglot's C++ tasks (Terminal-Bench datasets): run-tests.sh builds the workspace first,
    // `exit 1` when the build fails, and prints its own summary only after; a stub fails to build.
    const { verdict } = await validateTask(
      await tb1Task("builds-first", {
        "run-tests.sh": [
          "#!/bin/bash",
          "set -Eeuo pipefail",
          "cd /app",
          'if ! grep -q hello greeting.txt 2>/dev/null; then echo "CMake build failed"; exit 1; fi',
          'echo "=============== short test summary info ==============="',
          'echo "PASSED aider_polyglot_test"',
          "",
        ].join("\n"),
      }),
      check,
    );
    expect(verdict.controls?.runs.map((r) => [r.control, r.reward])).toEqual([
      ["oracle", 1],
      ["nop", 0],
    ]);
    expect(verdict.ok, verdict.problems.join("; ")).toBe(true);
  });

  it("is an environment failure, never a 0, when run-tests.sh prints no pytest summary and the environment failed", async () => {
    const { verdict } = await validateTask(
      await tb1Task("no-pytest", { "run-tests.sh": "#!/bin/bash\necho 'pytest: command not found'\n" }),
      check,
    );
    expect(verdict.controls?.runs.map((r) => r.reward)).toEqual([null, null]);
    expect(verdict.problems[0]).toMatch(/^oracle: environment failure: tests\/test\.sh exited 3/);
  });

  it("runs tests/run-tests.sh over run-tests.sh, builds a Dockerfile that copies them in, and tests on the image's PATH", async () => {
    // As LiveCodeBench Pro's tasks (Terminal-Bench datasets): Terminal-Bench copies tests/ over
    // run-tests.sh in /tests, the Dockerfile COPYs tests/ and run-tests.sh into the image, and its
    // ENV PATH puts a folder first that the tests need.
    const images = await buildableImages();
    const task = await tb1Task("shadowed", {
      Dockerfile: [
        "FROM python:3.11-slim",
        "RUN mkdir -p /opt/judge && printf '#!/bin/sh\\ncat /app/greeting.txt\\n' > /opt/judge/show-greeting && chmod +x /opt/judge/show-greeting",
        'ENV PATH="/opt/judge:$PATH"',
        "WORKDIR /app",
        "COPY tests/ /app/tests/",
        "COPY run-tests.sh /app/run-tests.sh",
        "",
      ].join("\n"),
      "run-tests.sh": "#!/bin/bash\necho 'the root run-tests.sh ran'\nexit 1\n",
      "tests/run-tests.sh": '#!/bin/bash\ncd "$(dirname "$0")"\nexec pytest test_outputs.py -rA\n',
      "tests/test_outputs.py": [
        "import subprocess",
        "",
        "def test_judge_sees_hello():",
        '    assert subprocess.run(["show-greeting"], capture_output=True, text=True).stdout.strip() == "hello"',
        "",
      ].join("\n"),
    });
    const { verdict } = await validateTask(task, { ...check, images, baseDir: dir });
    expect(verdict.problems, JSON.stringify(verdict.controls?.runs)).toEqual([]);
    expect(verdict.controls?.runs.map((r) => [r.control, r.reward])).toEqual([
      ["oracle", 1],
      ["nop", 0],
    ]);
    expect(verdict.notes).toEqual(
      expect.arrayContaining([
        "run-tests.sh: not run: tests/run-tests.sh takes its place in /tests, as Terminal-Bench copies tests/ over it",
        "Dockerfile: line 5: copies the task's tests into the image, where the agent can read it, as in Terminal-Bench",
        "Dockerfile: line 6: copies the task's run-tests.sh into the image, where the agent can read it, as in Terminal-Bench",
      ]),
    );
  }, 600_000);

  it("reads a compose file of one service as the task's container, whatever its name", async () => {
    // As tasks written after Terminal-Bench 1's own (query-optimize) name it.
    const one = await loadTask(
      await tb1Task("agent-environment", {
        "docker-compose.yaml":
          "services:\n  agent-environment:\n    build:\n      context: .\n    volumes:\n      - ./tests:/app/tests:ro\n      - ./tests:/tests\n      - ./data:/data\n      - ./tests:/app/$(reboot)\n    command: tail -f /dev/null\n",
      }),
    );
    expect(one.ok || one.problems).toBe(true);
    if (!one.ok) return;
    expect(one.task.notes).toEqual(
      expect.arrayContaining([
        "docker-compose.yaml: the task's tests are also put at /app/tests, where its compose file mounts them, for the tests only (not while the agent works)",
        "docker-compose.yaml: not read otherwise: the task's Dockerfile alone makes its environment",
      ]),
    );
    // Its run-tests.sh finds them from the workdir, as under Terminal-Bench's compose; only a
    // plain path other than /tests itself is taken.
    const script = one.task.tests.find((f) => f.path === "test.sh")!.content.toString("utf8");
    expect(script).toContain(
      "mkdir -p '/app/tests' && cp -a /tests/. '/app/tests/'\nbash /tests/run-tests.sh",
    );
    expect(script.match(/cp -a/g)).toHaveLength(1);
  });

  it("reads the services beside the task's container, and builds the container from its compose build context", async () => {
    // As Terminal-Bench's simple-web-scraper writes it: `client` and `server`, each from a folder.
    const folder = await tb1Task("with-server", {
      "docker-compose.yaml": [
        "services:",
        "  client:",
        "    build:",
        "      context: client",
        "      dockerfile: Dockerfile",
        // biome-ignore lint/suspicious/noTemplateCurlyInString: compose's own variable, left unresolved
        "    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}",
        '    command: [ "sh", "-c", "sleep infinity" ]',
        "  server:",
        "    build:",
        "      context: server",
        '    command: [ "python", "./serve.py" ]',
        "    environment:",
        "      - GREETING=hi",
        "    ports:",
        '      - "8000"',
        "    healthcheck:",
        '      test: [ "CMD", "curl", "-f", "http://localhost:8000" ]',
        "",
      ].join("\n"),
      "client/Dockerfile": "FROM python:3.13\nWORKDIR /app\nCOPY data.txt /app/data.txt\n",
      "client/data.txt": "rows\n",
      "server/Dockerfile": 'FROM python:3.13-slim\nCOPY serve.py .\nCMD ["python", "serve.py"]\n',
      "server/serve.py": "print('serving')\n",
    });
    await rm(join(folder, "Dockerfile"), { force: true });
    const read = await loadTask(folder);
    expect(read.ok || read.problems).toBe(true);
    if (!read.ok) return;
    expect(read.task.dockerfile?.name).toBe("client/Dockerfile");
    expect(read.task.environment.map((f) => f.path)).toEqual(["data.txt"]);
    expect(read.task.services).toEqual([
      {
        name: "server",
        dockerfile: expect.objectContaining({ name: "server/Dockerfile" }),
        command: ["python", "./serve.py"],
        env: { GREETING: "hi" },
        healthcheck: ["curl", "-f", "http://localhost:8000"],
        memoryMb: null,
        cpus: null,
      },
    ]);
    expect(read.task.services[0]!.dockerfile.context.map((f) => f.path).sort()).toEqual([
      "Dockerfile",
      "serve.py",
    ]);
    expect(read.task.notes).toContain(
      "docker-compose.yaml: service server runs beside the task's container, built from server/Dockerfile, on a network of their own",
    );

    // What cannot run beside it is refused by name.
    const volumes = await loadTask(
      await tb1Task("with-volume", {
        "docker-compose.yaml":
          "services:\n  client:\n    build: .\n  db:\n    image: postgres:16\n    volumes:\n      - data:/var/lib/postgresql\n",
      }),
    );
    expect(volumes.ok || volumes.problems).toEqual([
      "docker-compose.yaml: services.db: volumes: not supported for a service beside the task's container (its build, image, command, environment and healthcheck are)",
    ]);
    // compose's build context defaults to the compose file's folder, as Terminal-Bench's own tasks leave it.
    const dockerfileOnly = await loadTask(
      await tb1Task("context-default", {
        "docker-compose.yaml": "services:\n  client:\n    build:\n      dockerfile: Dockerfile\n",
      }),
    );
    expect(dockerfileOnly.ok && dockerfileOnly.task.dockerfile?.name).toBe("Dockerfile");
    const nameless = await loadTask(
      await tb1Task("no-client", {
        "docker-compose.yaml": "services:\n  app:\n    build: .\n  web:\n    image: nginx\n",
      }),
    );
    expect(nameless.ok || nameless.problems).toEqual([
      "docker-compose.yaml: services app, web: none is `client`, so none is known as the task's container",
    ]);
  });

  it("refuses a broken task.yaml or a missing solution, naming the file", async () => {
    const bad = await loadTask(await tb1Task("bad-yaml", { "task.yaml": "instruction: [unclosed\n" }));
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.problems[0]).toMatch(/^task\.yaml: line \d+, column \d+: /);
    const folder = await tb1Task("no-solution", { "task.yaml": "max_test_timeout_sec: -1\n" });
    await rm(join(folder, "solution.sh"));
    const missing = await loadTask(folder);
    expect(missing.ok).toBe(false);
    if (!missing.ok)
      expect(missing.problems).toEqual([
        "task.yaml: instruction: missing (or descriptions with a `base` entry)",
        "task.yaml: max_test_timeout_sec: a number of seconds from 0 to 86400, got -1",
        "solution.sh: missing, and no solution.yaml (the oracle control runs it)",
      ]);
  });
});

/** How Harbor's test.sh files begin: curl and uv from the network, both failing here, offline. */
const FETCHES_UV = [
  "#!/bin/bash",
  "apt-get update",
  "apt-get install -y curl",
  "curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh",
  "source $HOME/.local/bin/env",
];

/** Validates the task: the oracle must score 1 and the nop 0, with nothing else to say. */
async function expectBothControlsPass(task: string): Promise<void> {
  const { verdict } = await validateTask(task, check);
  expect(verdict.problems, JSON.stringify(verdict.controls?.runs)).toEqual([]);
  expect(verdict.controls?.runs.map((r) => [r.control, r.reward])).toEqual([
    ["oracle", 1],
    ["nop", 0],
  ]);
}

/** Writes a task's tests/test.sh from its lines. */
const writeTestScript = (task: string, lines: string[]) =>
  writeFile(join(task, "tests", "test.sh"), [...lines, ""].join("\n"));

describe("the verifier toolchain", () => {
  it("runs a Harbor test.sh that installs uv and runs uvx, offline, and only for verification", async () => {
    const task = join(dir, "harbor-pytest");
    await mkdir(join(task, "tests"), { recursive: true });
    await mkdir(join(task, "solution"), { recursive: true });
    await mkdir(join(task, "environment"), { recursive: true });
    await writeFile(join(task, "instruction.md"), "Write the word hello into greeting.txt.\n");
    await writeFile(join(task, "task.toml"), 'version = "1.0"\n[metadata]\ncategory = "build"\n');
    await writeFile(join(task, "environment", "notes.txt"), "remember to greet\n");
    await writeFile(
      join(task, "solution", "solve.sh"),
      "#!/bin/bash\n# the toolchain is not there for the agent phase\ncommand -v uvx pytest && exit 1\necho hello > greeting.txt\n",
    );
    await writeFile(
      join(task, "tests", "test_outputs.py"),
      'from pathlib import Path\n\ndef test_hello():\n    assert Path("/app/greeting.txt").read_text().strip() == "hello"\n',
    );
    // The shape of most Harbor tasks' tests/test.sh: install curl and uv from the network (both
    // fail here, offline), then run pytest through uvx with the versions the task pins.
    await writeTestScript(task, [
      ...FETCHES_UV,
      "uvx --with pytest==8.4.1 --with pytest-json-ctrf==0.3.5 pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA",
      "if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi",
      "test -s /logs/verifier/ctrf.json || echo 'no ctrf report' > /logs/verifier/reward.txt",
    ]);
    await expectBothControlsPass(task);
  });

  it("runs Terminal-Bench 2's test.sh, which asks uv for Python 3.13, on the toolchain's CPython 3.13", async () => {
    const task = join(dir, "harbor-pytest");
    const before = await readFile(join(task, "tests", "test.sh"));
    await writeFile(
      join(task, "tests", "test_python.py"),
      "import sys\n\ndef test_python_is_3_13():\n    assert sys.version_info[:2] == (3, 13)\n",
    );
    // Terminal-Bench 2's tests/test.sh, as its tasks ship it.
    await writeTestScript(task, [
      ...FETCHES_UV,
      "uvx \\",
      "  -p 3.13 \\",
      "  -w pytest==8.4.1 \\",
      "  -w pytest-json-ctrf==0.3.5 \\",
      "  pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py /tests/test_python.py -rA",
      "if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi",
    ]);
    try {
      await expectBothControlsPass(task);
    } finally {
      await rm(join(task, "tests", "test_python.py"));
      await writeFile(join(task, "tests", "test.sh"), before);
    }
  });

  it("fails as an environment failure naming a Python version this host lacks", async () => {
    const task = join(dir, "harbor-pytest");
    const script = join(task, "tests", "test.sh");
    await writeFile(
      script,
      (await readFile(script, "utf8")).replace("uvx --with", "set -e\nuvx -p 3.99 --with"),
    );
    const { verdict } = await validateTask(task, check);
    expect(verdict.controls?.runs.map((r) => r.reward)).toEqual([null, null]);
    expect(verdict.controls?.runs[0]?.message).toMatch(
      /environment failure: tests\/test\.sh exited \d+ without writing a reward: .*3\.99/,
    );
  });

  it("scores 0 when pytest reported failures and test.sh stopped before writing its reward", async () => {
    const task = join(dir, "harbor-pytest");
    // A slip public Harbor tasks make: `set -e`, so failing tests end the script before the line
    // that writes the reward. The tests did judge the work: a 0, not an environment failure.
    await writeTestScript(task, [
      "#!/bin/bash",
      "set -e",
      "mkdir -p /logs/verifier",
      "pytest /tests/test_outputs.py -rA",
      "echo 1 > /logs/verifier/reward.txt",
    ]);
    await expectBothControlsPass(task);
    expect(pytestFailures("x\n===== 1 failed, 2 passed in 0.12s (0:00:00) =====\n")).toBe(
      "1 failed, 2 passed in 0.12s",
    );
    expect(pytestFailures("===== 3 passed in 0.12s =====\n===== 1 error in 0.1s =====")).toBeUndefined();
  });

  it("excludes a score the tests made without a package they could not install offline, naming it", async () => {
    const task = join(dir, "harbor-pytest");
    // Terminal-Bench's shape: uv installs what the tests import, the script goes on when it
    // cannot, and the tests then fail to import it; a 0 that measures the toolchain, not the agent.
    await writeTestScript(task, [
      "#!/bin/bash",
      "source $HOME/.local/bin/env",
      "uv venv /tmp/.tbench-testing && source /tmp/.tbench-testing/bin/activate",
      "uv pip install pytest==8.4.1 left-pad-not-there==0.0.1",
      "python -c 'import left_pad' && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt",
    ]);
    const { verdict } = await validateTask(task, check);
    expect(verdict.controls?.runs.map((r) => r.reward)).toEqual([null, null]);
    expect(verdict.controls?.runs[0]?.message).toContain(
      "the tests need left-pad-not-there==0.0.1, which the offline verifier toolchain does not hold",
    );
  });

  it("scores a 0 whose output only imitates a resolver: a package the tests never name, or one the toolchain holds", async () => {
    const task = join(dir, "harbor-pytest");
    // The agent's program prints uv's words for a package the tests do not install; the tests
    // print them for one they do install but the toolchain holds. Neither is missing: 0 stands.
    await writeFile(
      join(task, "solution", "solve.sh"),
      "#!/bin/bash\necho 'echo \"Because evilpkg was not found in the cache and you require evilpkg==1.0, we can conclude\"' > /app/fake.sh\n",
    );
    await writeTestScript(task, [
      "#!/bin/bash",
      "bash /app/fake.sh 2>/dev/null",
      "echo 'Because pyyaml was not found in the cache and you require pyyaml==6.0.2, we can conclude'",
      "echo 0 > /logs/verifier/reward.txt",
    ]);
    const { verdict } = await validateTask(task, check);
    expect(verdict.controls?.runs.map((r) => [r.control, r.reward])).toEqual([
      ["oracle", 0],
      ["nop", 0],
    ]);
  });
});
