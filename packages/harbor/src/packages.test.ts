import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { EnvironmentImages } from "@bridle/sandbox";
import { afterAll, describe, expect, it } from "vitest";
import { validateTask } from "./index.ts";
import {
  scriptDebianPackages,
  scriptNpmInstalls,
  scriptRequirements,
  taskRequirements,
  wheelsHeld,
} from "./packages.ts";
import { buildableImages, requireToolchain, toolchain } from "./test-support.ts";

const sh = (path: string, text: string) => ({ path, mode: 0o644, content: Buffer.from(text) });

describe("the packages a task's scripts install", () => {
  it("reads pip, uv pip, uv add and uvx --with, one list per command", () => {
    const script = [
      "#!/bin/bash",
      "apt-get install -y curl",
      "curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh",
      "uv venv .tbench-testing",
      "uv pip install pytest==8.4.1 pandas==2.3.0 pyarrow==20.0.0",
      "pip3 install --break-system-packages -q 'requests>=2.31' -r requirements.txt",
      "python3 -m pip install --upgrade pip && python -m pip install numpy --index-url https://x.example/simple",
      "uv add pandas pyarrow  # the converter's needs",
      "uvx -p 3.13 --with pytest==8.4.1 -w pytest-json-ctrf==0.3.5 --with=scipy==1.16.0 pytest --ctrf /logs/verifier/ctrf.json -w ignored",
      "uv run --with 'rich[jupyter]' python check.py -w not-a-package",
      "pip install \\",
      "    six==1.17.0 \\",
      "    ./local-package > /dev/null 2>&1",
      "uv pip install -e . && pip install https://example.com/pkg.whl",
      "echo pip install not-this",
      "uvx harbor-rewardkit@0.1 /tests && uvx ruff@latest check . && uv tool run black --check .",
      "uvx --from 'httpie==3.2.4' http :8000 && uvx python -c 1 && uvx -p 3.12 python3.12 x.py",
      "uvx --with pytest==8.4.1 pytest -q",
    ].join("\n");
    expect(scriptRequirements(script)).toEqual([
      { requirements: ["pytest==8.4.1", "pandas==2.3.0", "pyarrow==20.0.0"] },
      { requirements: ["requests>=2.31"] },
      { requirements: ["numpy"] },
      { requirements: ["pandas", "pyarrow"] },
      { requirements: ["pytest==8.4.1", "pytest-json-ctrf==0.3.5", "scipy==1.16.0"], python: "3.13" },
      { requirements: ["rich[jupyter]"] },
      { requirements: ["six==1.17.0"] },
      { requirements: ["harbor-rewardkit==0.1"] },
      { requirements: ["ruff"] },
      { requirements: ["black"] },
      { requirements: ["httpie==3.2.4"] },
      { requirements: ["pytest==8.4.1"] },
    ]);
  });

  it("leaves out what the verifier toolchain already holds, and repeats", () => {
    const pins = wheelsHeld([
      "pytest-8.4.1-py3-none-any.whl",
      "pytest_json_ctrf-0.3.5-py3-none-any.whl",
      "PyYAML-6.0.2-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
      "README",
    ]);
    const scripts = [
      sh(
        "tests/test.sh",
        "uvx --with pytest==8.4.1 --with pytest-json-ctrf==0.3.5 pytest\npip install pyyaml\n",
      ),
      sh("tests/run-tests.sh", "uv pip install pytest==8.3.4\nuv pip install pytest==8.4.1 pandas==2.3.0\n"),
      sh("solution/solve.sh", "uv pip install pytest==8.4.1 pandas==2.3.0\nuv add pandas\n"),
      sh("tests/test_outputs.py", "# pip install torch\n"),
    ];
    expect(taskRequirements(scripts, pins)).toEqual([
      { requirements: ["pytest==8.3.4"] },
      { requirements: ["pytest==8.4.1", "pandas==2.3.0"] },
      { requirements: ["pandas"] },
    ]);
  });
});

describe("scriptDebianPackages", () => {
  it("reads apt-get install and apt install, options anywhere, and only package names", () => {
    const script = [
      "apt-get update && apt-get install -y --no-install-recommends jq curl=7.88.1-10+deb12u12 \\",
      "    libssl-dev:amd64 > /dev/null",
      "DEBIAN_FRONTEND=noninteractive sudo apt -o Dpkg::Options::=--force-confnew install -qq tree",
      "apt-get -y install ./local.deb $EXTRA 'lib*' sqlite3 # and nothing of this: apt-get install x",
      "apt-get remove -y nano; apt list --installed; echo apt-get install not-this",
    ].join("\n");
    expect(scriptDebianPackages(script)).toEqual([
      "jq",
      "curl=7.88.1-10+deb12u12",
      "libssl-dev:amd64",
      "tree",
      "sqlite3",
    ]);
  });
});

describe("scriptNpmInstalls", () => {
  it("reads a project's install (npm install, npm ci) and the packages named, options anywhere", () => {
    const script = [
      "if [ -f package.json ]; then npm install; fi",
      "npm ci --no-audit",
      "sudo npm install -g jest@^29.6.4 '@babel/core@^7.25.2' --prefix /usr/local eslint",
      "npm i ./local.tgz $EXTRA git+https://example.com/x.git lodash # npm install not-this",
      "npm test; npm run build; echo npm install not-this-either",
    ].join("\n");
    expect(scriptNpmInstalls(script)).toEqual({
      project: true,
      packages: ["jest@^29.6.4", "@babel/core@^7.25.2", "eslint", "lodash"],
    });
    expect(scriptNpmInstalls("npm install is-number@7.0.0")).toEqual({
      project: false,
      packages: ["is-number@7.0.0"],
    });
  });
});

/** Writes a task's files, validates it on `images` and checks that both controls pass; its verdict. */
async function passesControls(task: string, files: Record<string, string>, images: EnvironmentImages) {
  for (const [path, content] of Object.entries(files)) {
    await mkdir(join(task, path, ".."), { recursive: true });
    await writeFile(join(task, path), content);
  }
  const { verdict } = await validateTask(task, { repeats: 1, toolchain, images, baseDir: dirname(task) });
  expect(verdict.problems).toEqual([]);
  expect(verdict.controls?.runs.map((r) => [r.control, r.reward])).toEqual([
    ["oracle", 1],
    ["nop", 0],
  ]);
  return verdict;
}

describe("a task whose scripts install packages, on podman", () => {
  let dir: string | undefined;
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("gets them fetched into its image at build, and its solution and tests install them offline", async () => {
    requireToolchain();
    const images = await buildableImages();
    dir = await mkdtemp(join(tmpdir(), "bridle-packages-"));
    const task = join(dir, "count-to-toml");
    // Terminal-Bench 1's layout, as its tasks are written: a base without WORKDIR (its own sets
    // /app), `COPY x ./`, and scripts that fetch uv and packages from the network at run time.
    const files: Record<string, string> = {
      "task.yaml":
        "instruction: |-\n  Write the number in /app/count.txt into /app/out.toml as the key n.\ncategory: file-operations\nmax_agent_timeout_sec: 120\nmax_test_timeout_sec: 120\n",
      Dockerfile:
        "FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624\nCOPY count.txt ./\nCOPY pyproject.toml counter.py ./\n",
      "count.txt": "3\n",
      // A project at the workdir, as `uv init` leaves one: the tests' `uv run` builds it again,
      // offline, with its build backend.
      "pyproject.toml": [
        "[build-system]",
        'requires = ["flit_core>=3.9,<4"]',
        'build-backend = "flit_core.buildapi"',
        "",
        "[project]",
        'name = "counter"',
        'version = "0.1.0"',
        'description = "The workdir\'s project"',
        "",
      ].join("\n"),
      "counter.py": "",
      "solution.sh": [
        "#!/bin/bash",
        "curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh",
        "source $HOME/.local/bin/env",
        "uv venv /tmp/solve && . /tmp/solve/bin/activate && uv pip install tomli-w",
        "python -c \"import tomli_w; print(tomli_w.dumps({'n': int(open('count.txt').read())}), end='')\" > out.toml",
        // What the agent does to the wheels stays in its own phase: the tests install from the image's.
        "rm -rf /opt/bridle/packages/*",
        "",
      ].join("\n"),
      "run-tests.sh": [
        "#!/bin/bash",
        "curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh",
        "source $HOME/.local/bin/env",
        "uv venv .tbench-testing",
        "source .tbench-testing/bin/activate",
        "uv pip install pytest==8.4.1 tomli==2.2.1",
        // Terminal-Bench 2's way: uv runs a Python 3.13 of its own, with its own wheels.
        `uvx -p 3.13 -w tomli==2.2.1 python -c "import sys, tomli; print(sys.version_info[1])" > /tmp/uvx-minor`,
        "pip install bridle-no-such-package==0.0.1 || true",
        // apt as Harbor's test.sh template uses it, for a package the image does not have.
        "apt-get update && apt-get install -y jq && echo '{\"n\": 3}' | jq .n > /tmp/jq-n",
        "apt-get install -y bridle-no-such-deb || true",
        "uv run pytest $TEST_DIR/test_outputs.py -rA",
        "",
      ].join("\n"),
      "tests/test_outputs.py": [
        "import tomli",
        "",
        "def test_uvx_ran_python_3_13_with_its_wheel():",
        '    assert open("/tmp/uvx-minor").read().strip() == "13"',
        "",
        "def test_jq_installed_offline():",
        '    assert open("/tmp/jq-n").read().strip() == "3"',
        "",
        "def test_out_holds_the_count():",
        '    with open("/app/out.toml", "rb") as f:',
        '        assert tomli.load(f) == {"n": 3}',
        "",
      ].join("\n"),
    };
    const verdict = await passesControls(task, files, images);
    expect(verdict.notes).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /-> localhost\/bridle\/t-bench-ubuntu:24\.04 \(Ubuntu 24\.04 with tmux and asciinema, in \/app\)/,
        ),
        expect.stringMatching(
          /^the Python packages its scripts install \(pytest==8\.4\.1 tomli==2\.2\.1 tomli==2\.2\.1 \(for Python 3\.13\) bridle-no-such-package==0\.0\.1 tomli-w\), the build requirements of a pyproject\.toml at its workdir, and uv==[0-9.]+: fetched from PyPI while the image builds/,
        ),
        expect.stringMatching(
          /^the system packages its scripts install with apt \(jq bridle-no-such-deb\): those the image lacks downloaded from the system's archive/,
        ),
        expect.stringMatching(
          /^not fetched, so its install fails offline in the sandbox: apt-get install bridle-no-such-deb: E: Unable to locate package/,
        ),
        // What PyPI does not have fails nothing at build: its install fails offline, as it would have.
        expect.stringMatching(
          /^not fetched, so its install fails offline in the sandbox: bridle-no-such-package==0\.0\.1: ERROR: .*No matching distribution/,
        ),
      ]),
    );
  }, 600_000);

  it("gets what its scripts install with npm fetched into its image's npm cache, so npm installs offline", async () => {
    const images = await buildableImages();
    dir ??= await mkdtemp(join(tmpdir(), "bridle-packages-"));
    const task = join(dir, "npm-project");
    // As aider-polyglot's JavaScript tasks in Terminal-Bench's datasets: a package.json in /app, and
    // tests whose bare `npm install` reaches the registry at test time.
    const files: Record<string, string> = {
      "task.toml":
        '[metadata]\ncategory = "build"\n\n[agent]\ntimeout_sec = 120\n\n[verifier]\ntimeout_sec = 120\n',
      "instruction.md": "Write an even number into /app/n.txt.\n",
      "environment/Dockerfile": "FROM node:20\nWORKDIR /app\nCOPY package.json ./\n",
      "environment/package.json":
        '{ "name": "even", "version": "1.0.0", "dependencies": { "is-even": "1.0.0" } }\n',
      "solution/solve.sh": "#!/bin/bash\necho 4 > /app/n.txt\n",
      "tests/test.sh": [
        "#!/bin/bash",
        "cd /app && npm install && npm install --no-save is-number@7.0.0 || exit 1",
        `node -e "const n = Number(require('fs').readFileSync('n.txt', 'utf8')); process.exit(require('is-even')(n) && require('is-number')(n) ? 0 : 1)"`,
        "[ $? = 0 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt",
        "",
      ].join("\n"),
    };
    const verdict = await passesControls(task, files, images);
    expect(verdict.notes).toContain(
      "what its scripts install with npm (the dependencies of its package.json, is-number@7.0.0): fetched from the npm registry while the image builds, into npm's cache in /opt/bridle/npm-cache, from which npm installs offline in the sandbox",
    );
  }, 600_000);
});
