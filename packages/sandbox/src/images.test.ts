import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildFailure } from "./images.ts";
import {
  BASE_IMAGE,
  EnvironmentImages,
  ImageBuildError,
  packFolder,
  planDockerfile,
  Sandbox,
  ServiceStartError,
  TaskServices,
} from "./index.ts";

describe("planDockerfile", () => {
  it("resolves public images to local bases, says so, and runs RUN under pipefail", () => {
    const plan = planDockerfile(
      "# comment\nFROM --platform=linux/amd64 python:3.11-slim AS build\nRUN echo a | \\\n  cat\nFROM build\nWORKDIR /app\n",
      "environment/Dockerfile",
    );
    expect(plan.dockerfile).toBe(
      'FROM localhost/bridle/python:3.11 AS build\nSHELL ["/bin/bash", "-o", "pipefail", "-c"]\nRUN echo a | cat\nFROM build\nSHELL ["/bin/bash", "-o", "pipefail", "-c"]\nWORKDIR /app\n',
    );
    expect(plan.substitutions).toEqual([
      "environment/Dockerfile: line 2: FROM python:3.11-slim -> localhost/bridle/python:3.11 (Debian 12 with its python3 3.11, pip installing system-wide)",
    ]);
    expect(planDockerfile("FROM docker.io/library/gcc:13\n").substitutions[0]).toMatch(
      /localhost\/bridle\/gcc:12/,
    );
    // Releases whose archives builds reach are themselves: Ubuntu 22.04, 24.04, 26.04, Debian 13.
    const releases: [string, string, string][] = [
      ["ubuntu:24.04", "ubuntu:24.04", "Ubuntu 24.04"],
      ["ubuntu:noble-20250910", "ubuntu:24.04", "Ubuntu 24.04"],
      ["docker.io/library/ubuntu:jammy", "ubuntu:22.04", "Ubuntu 22.04"],
      ["ubuntu", "ubuntu:26.04", "Ubuntu 26.04"],
      ["debian:trixie-slim", "debian:13", "Debian 13"],
      ["debian:bookworm", "debian:12", "Debian 12"],
      ["ubuntu:20.04", "debian:12", "Debian 12"],
      ["buildpack-deps:noble-scm", "buildpack-deps:noble", "Ubuntu 24.04 with gcc"],
    ];
    for (const [from, local, says] of releases)
      expect(planDockerfile(`FROM ${from}\n`).substitutions[0] ?? "", from).toContain(
        `-> localhost/bridle/${local} (${says}`,
      );
    // Python at the version asked where a release has it as its python3 (3.10, 3.11, 3.12, 3.13,
    // 3.14); Debian 12's 3.11 for the others. Docker Hub's full python image has gcc and Python's
    // headers (buildpack-deps); slim has neither.
    for (const [full, version] of [
      ["python:3.12", "3.12"],
      ["python", "3.11"],
      ["docker.io/library/python:3.13-bookworm", "3.13"],
      ["pypy:3.10", "3.10"],
      ["python:3.9", "3.11"],
    ])
      expect(planDockerfile(`FROM ${full}\n`).substitutions[0], full).toMatch(
        new RegExp(
          `-> localhost/bridle/python-full:${version} \\(.*python3 ${version} and its headers, gcc and make`,
        ),
      );
    for (const [slim, version] of [
      ["python:3.12-slim", "3.12"],
      ["python:3.11-alpine", "3.11"],
      ["python:3.13-slim-bookworm", "3.13"],
      ["python:3.14-slim", "3.14"],
    ])
      expect(planDockerfile(`FROM ${slim}\n`).dockerfile, slim).toMatch(
        new RegExp(`^FROM localhost/bridle/python:${version}\n`),
      );
    // Docker Hub's official images from a mirror, pinned by digest, and Terminal-Bench's own bases.
    const mirrored = "public.ecr.aws/docker/library/python:3.13-slim-bookworm@sha256:01f42367a0a9";
    expect(planDockerfile(`FROM ${mirrored}\n`).dockerfile).toMatch(
      /^FROM localhost\/bridle\/python:3\.13\n/,
    );
    expect(planDockerfile(`FROM ${BASE_IMAGE}\n`).substitutions).toEqual([]);
    // Go by the line a tag asks for, from bookworm-backports where Debian 12's own (1.19) is older.
    const goTags: [string, string][] = [
      ["golang:1.22-bookworm", "1.22"],
      ["golang:1.20", "1.21"],
      ["golang:1.18-alpine", "1.19"],
      ["golang", "1.23"],
      ["golang:1.25", "1.23"],
    ];
    for (const [tag, line] of goTags)
      expect(planDockerfile(`FROM ${tag}\n`).dockerfile, tag).toMatch(
        new RegExp(`^FROM localhost/bridle/golang:${line}\n`),
      );
    expect(planDockerfile("FROM golang:1.21\n").substitutions[0]).toMatch(
      /-> localhost\/bridle\/golang:1\.21 \(Debian 12 with Go 1\.21\.\d+ from bookworm-backports, at \/usr\/local\/go\)$/,
    );
    // Node.js by the line a tag asks for: the Node project's build, not Debian 12's Node.js 18.
    const nodeTags: [string, number][] = [
      ["node:20-bookworm-slim", 20],
      ["node:20.11.1-alpine", 20],
      ["node:21", 22],
      ["node:16", 18],
      ["node:lts-slim", 24],
      ["node:iron", 20],
      ["node", 26],
      ["node:current-bookworm", 26],
    ];
    for (const [tag, major] of nodeTags)
      expect(planDockerfile(`FROM ${tag}\n`).dockerfile, tag).toMatch(
        new RegExp(`^FROM localhost/bridle/node:${major}\n`),
      );
    expect(planDockerfile("FROM node:22\n").substitutions[0]).toMatch(
      /-> localhost\/bridle\/node:22 \(Debian 12 with Node\.js 22\.\d+\.\d+ and npm 10\.\d+\.\d+, the Node project's build from the npm registry\)/,
    );
    // Terminal-Bench's bases work in /app (their tasks `COPY file ./`), with tmux.
    expect(planDockerfile("FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620\n").dockerfile).toMatch(
      /^FROM localhost\/bridle\/t-bench-python:3\.13\n/,
    );
    expect(
      planDockerfile("FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624\n").substitutions[0],
    ).toMatch(
      /-> localhost\/bridle\/t-bench-ubuntu:24\.04 \(Ubuntu 24\.04 with tmux and asciinema, in \/app\)/,
    );
    expect(planDockerfile("FROM ghcr.io/laude-institute/t-bench/ubuntu-20-04\n").substitutions[0]).toMatch(
      /-> localhost\/bridle\/t-bench-ubuntu:12 \(Debian 12 with tmux/,
    );
  });

  it("replaces only the download of uv's installer, in shell-form RUN steps", () => {
    const plan = planDockerfile(
      [
        `FROM ${BASE_IMAGE}`,
        'RUN sh -c "$(curl -fsSL https://astral.sh/uv/install.sh)" && echo next',
        'RUN ["sh", "-c", "curl https://astral.sh/uv/install.sh | sh"]',
        "RUN curl -fsSL https://example.com/install.sh | sh",
      ].join("\n"),
    );
    const runs = plan.dockerfile.split("\n").filter((l) => l.startsWith("RUN"));
    expect(runs[0]).toMatch(/^RUN sh -c "\$\(printf '%s\\n' 'set -e; v=""; .+ from PyPI"' \)" && echo next$/);
    expect(runs.slice(1)).toEqual([
      'RUN ["sh", "-c", "curl https://astral.sh/uv/install.sh | sh"]',
      "RUN curl -fsSL https://example.com/install.sh | sh",
    ]);
    expect(plan.substitutions).toHaveLength(1);
  });

  it("builds uv's image from PyPI where a Dockerfile copies from it or starts a stage from it", () => {
    const plan = planDockerfile(
      [
        "ARG PY=3.11",
        "FROM ghcr.io/astral-sh/uv:0.8 AS uv",
        "FROM python:3.11-slim",
        "COPY --from=ghcr.io/astral-sh/uv:0.8.15 /uv /uvx /bin/",
        "COPY --chmod=755 --from=uv /uv /usr/local/bin/uv",
        "COPY --from=ghcr.io/astral-sh/uv /uvx /opt/",
        "COPY --from=ghcr.io/astral-sh/uv:0.8-python3.12-bookworm /uv /bin/",
      ].join("\n"),
      "environment/Dockerfile",
    );
    const built = plan.dockerfile.split("\n");
    // Its stages come after the global ARGs, before the first FROM; one per version named.
    expect(built[0]).toBe("ARG PY=3.11");
    expect(built.filter((l) => l.startsWith("FROM"))).toEqual([
      `FROM ${BASE_IMAGE} AS bridle-uv-0-8`,
      `FROM ${BASE_IMAGE} AS bridle-uv-0-8-15`,
      `FROM ${BASE_IMAGE} AS bridle-uv-latest`,
      "FROM bridle-uv-0-8 AS uv",
      "FROM localhost/bridle/python:3.11",
    ]);
    expect(built.filter((l) => l.includes("pip install")).map((l) => l.match(/"uv[^"]*"/)?.[0])).toEqual([
      '"uv==0.8.*"',
      '"uv==0.8.15"',
      '"uv"',
    ]);
    expect(built.filter((l) => l.startsWith("COPY"))).toEqual([
      "COPY --from=bridle-uv-0-8-15 /uv /uvx /bin/",
      "COPY --chmod=755 --from=uv /uv /usr/local/bin/uv",
      "COPY --from=bridle-uv-latest /uvx /opt/",
      // An image of uv with a system in it is another image, which is not stood in for.
      "COPY --from=ghcr.io/astral-sh/uv:0.8-python3.12-bookworm /uv /bin/",
    ]);
    expect(plan.substitutions.slice(0, 3)).toEqual([
      "environment/Dockerfile: line 2: ghcr.io/astral-sh/uv:0.8 -> uv==0.8.* from PyPI, laid out as uv's image has it (/uv, /uvx; ghcr.io is not reachable from builds)",
      "environment/Dockerfile: line 4: ghcr.io/astral-sh/uv:0.8.15 -> uv==0.8.15 from PyPI, laid out as uv's image has it (/uv, /uvx; ghcr.io is not reachable from builds)",
      "environment/Dockerfile: line 6: ghcr.io/astral-sh/uv -> uv from PyPI, laid out as uv's image has it (/uv, /uvx; ghcr.io is not reachable from builds)",
    ]);
  });

  it("stands the Node project's build in for NodeSource's setup script, piped or saved", () => {
    const plan = planDockerfile(
      [
        "FROM ubuntu:22.04",
        "RUN curl -fsSL https://deb.nodesource.com/setup_lts.x | bash - && apt-get install -y nodejs",
        "RUN wget -qO- https://deb.nodesource.com/setup_18.x | sudo -E bash -",
      ].join("\n"),
      "environment/Dockerfile",
    );
    const runs = plan.dockerfile.split("\n").filter((l) => l.startsWith("RUN printf"));
    expect(runs[0]).toMatch(
      /^RUN printf '%s\\n' 'set -e; .+node-linux-\$arch-24\.\d+\.\d+\.tgz.+' \| bash - && apt-get install -y nodejs$/,
    );
    expect(runs[1]).toMatch(/node-linux-\$arch-18\.\d+\.\d+\.tgz.+' \| sudo -E bash -$/);
    expect(plan.substitutions.filter((n) => n.includes("nodesource"))).toEqual([
      expect.stringMatching(
        /^environment\/Dockerfile: line 2: curl -fsSL https:\/\/deb\.nodesource\.com\/setup_lts\.x -> Node\.js 24\./,
      ),
      expect.stringMatching(
        /^environment\/Dockerfile: line 3: wget -qO- https:\/\/deb\.nodesource\.com\/setup_18\.x -> Node\.js 18\./,
      ),
    ]);
  });

  it("says a Launchpad PPA is out of reach, where add-apt-repository fails on it", () => {
    const dockerfile =
      "FROM ubuntu:24.04\nRUN apt-get install -y software-properties-common && add-apt-repository ppa:git-core/ppa && apt-get update\n";
    const plan = planDockerfile(dockerfile, "Dockerfile");
    const output = [
      "STEP 2/2: RUN apt-get install -y software-properties-common && add-apt-repository ppa:git-core/ppa && apt-get update",
      "    ^^^^^^^^^^^^^^",
      "AttributeError: 'NoneType' object has no attribute 'people'",
      'Error: building at STEP "RUN apt-get install ...": while running runtime: exit status 1',
    ].join("\n");
    expect(buildFailure(output, plan, "Dockerfile").message).toBe(
      "Dockerfile: line 2: RUN apt-get install -y software-properties-common && add-apt-repository ppa:git-core/ppa && apt-get update: failed: ppa:git-core/ppa is on Launchpad, which builds cannot reach (they reach Debian's and Ubuntu's archives and PyPI)",
    );
    // The same step failing for another reason says what it printed.
    expect(
      buildFailure(output.replace(/.*'people'.*/, "E: Unable to locate package x"), plan, "Dockerfile")
        .message,
    ).toMatch(/failed: .*Unable to locate package x/);
  });

  it("stands the system's rustc and cargo in for rustup's installer, where rustup puts them", () => {
    // Aider-polyglot's Rust tasks (Terminal-Bench datasets) install Rust with rustup.
    const plan = planDockerfile(
      "FROM buildpack-deps:jammy\nRUN curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y\nENV PATH=\"/root/.cargo/bin:$PATH\"\n",
      "Dockerfile",
    );
    const run = plan.dockerfile.split("\n").find((l) => l.startsWith("RUN printf"));
    expect(run).toMatch(
      /^RUN printf '%s\\n' 'set -e; apt-get update -qq; .*rustc cargo.*; d="\$\{CARGO_HOME:-\$HOME\/\.cargo\}"; .*' \| sh -s -- -y$/,
    );
    expect(plan.substitutions.at(-1)).toBe(
      "Dockerfile: line 2: curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs -> Ubuntu 22.04's rustc and cargo, linked where rustup puts them (sh.rustup.rs is not reachable from builds; rustup's stable is newer)",
    );
  });

  it("names the failing stage's line, and the host a step reached for, in a build of several stages", () => {
    // Terminal-Bench's mnist-learning-fix: the same pip line in both stages; the builder's dataset
    // script downloads from Hugging Face.
    const plan = planDockerfile(
      [
        "FROM python:3.13 AS builder",
        "RUN pip install numpy==2.3.1",
        "RUN python create_dataset.py",
        "FROM python:3.13",
        "RUN pip install numpy==2.3.1",
        "RUN python train.py",
      ].join("\n"),
    );
    const output = [
      "[1/2] STEP 1/4: FROM localhost/bridle/python-full:3.13 AS builder",
      "[1/2] STEP 3/4: RUN pip install numpy==2.3.1",
      "[1/2] STEP 4/4: RUN python create_dataset.py",
      "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded (Caused by NameResolutionError(\"Failed to resolve 'huggingface.co'\"))",
      'Error: building at STEP "RUN python create_dataset.py": while running runtime: exit status 1',
    ].join("\n");
    expect(buildFailure(output, plan, "Dockerfile").message).toMatch(
      /^Dockerfile: line 3: RUN python create_dataset\.py: failed: it reaches for huggingface\.co, which builds cannot reach \(they reach Debian's and Ubuntu's archives, PyPI and the npm registry\): Error: building at STEP/,
    );
    const second = output.replace(
      /\[1\/2\] STEP 4\/4: RUN python create_dataset\.py[\s\S]*$/,
      "[2/2] STEP 3/4: RUN pip install numpy==2.3.1\nERROR: No matching distribution found for numpy==2.3.1",
    );
    expect(buildFailure(second, plan, "Dockerfile").line).toBe(5);
  });

  it("stands the system's Go in for Go's release archive, saved or piped, at the line asked or the nearest newer", () => {
    // Aider-polyglot's Go tasks (Terminal-Bench datasets) download Go 1.21.5 from golang.org.
    const plan = planDockerfile(
      [
        "FROM buildpack-deps:jammy",
        'RUN GOARCH=amd64 && curl -L "https://golang.org/dl/go1.21.5.linux-$GOARCH.tar.gz" -o go.tar.gz && tar -C /usr/local -xzf go.tar.gz',
        "FROM debian:12",
        "RUN curl -sSL https://dl.google.com/go/go1.20.linux-amd64.tar.gz | tar -C /usr/local -xz",
      ].join("\n"),
      "Dockerfile",
    );
    const runs = plan.dockerfile.split("\n").filter((l) => l.startsWith("RUN"));
    expect(runs[0]).toContain("apt-get install -y -qq --no-install-recommends golang-1.21-go >/dev/null && ");
    expect(runs[0]).toContain(
      "tar -chzf go.tar.gz -C /usr/lib --transform s,^go-1.21,go, go-1.21 && DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq --auto-remove golang-1.21-go golang-1.21-src >/dev/null; } && tar -C /usr/local -xzf go.tar.gz",
    );
    expect(runs[1]).toContain("-t bookworm-backports golang-1.21-go");
    expect(runs[1]).toMatch(
      /tar -chz -C \/usr\/lib --transform s,\^go-1\.21,go, go-1\.21 && .* golang-1\.21-src >\/dev\/null; \} \| tar -C \/usr\/local -xz$/,
    );
    expect(plan.substitutions.filter((s) => s.includes("Go's download site"))).toEqual([
      `Dockerfile: line 2: curl -L "https://golang.org/dl/go1.21.5.linux-$GOARCH.tar.gz" -o go.tar.gz -> Go 1.21 from Ubuntu 22.04's archive (golang-1.21-go), packed as Go's release archive is (Go's download site is not reachable from builds)`,
      "Dockerfile: line 4: curl -sSL https://dl.google.com/go/go1.20.linux-amd64.tar.gz -> Go 1.21 from Debian 12's archive (golang-1.21-go, bookworm-backports), packed as Go's release archive is, for the 1.20 asked (Go's download site is not reachable from builds)",
    ]);
  });

  it("names the package index a pip install was pointed at that builds cannot reach", () => {
    const plan = planDockerfile(
      "FROM python:3.13-slim\nRUN pip install torch==2.7.0 --index-url https://download.pytorch.org/whl/cpu\n",
    );
    const output = [
      "STEP 3/3: RUN pip install torch==2.7.0 --index-url https://download.pytorch.org/whl/cpu",
      "ERROR: Could not find a version that satisfies the requirement torch==2.7.0 (from versions: none)",
      "ERROR: No matching distribution found for torch==2.7.0",
    ].join("\n");
    expect(buildFailure(output, plan, "Dockerfile").message).toBe(
      "Dockerfile: line 2: RUN pip install torch==2.7.0 --index-url https://download.pytorch.org/whl/cpu: failed: https://download.pytorch.org/whl/cpu is not reachable from builds (they reach Debian's and Ubuntu's archives and PyPI), so pip found no version there",
    );
  });

  it("leaves deadsnakes' PPA out (Ubuntu 22.04's archive has Python 3.11), and names a Python only the PPA has", () => {
    // Aider-polyglot's Python tasks (Terminal-Bench datasets) add it on Ubuntu 22.04 for python3.11.
    const step = (python: string) =>
      `RUN apt-get update && apt-get install -y software-properties-common && add-apt-repository ppa:deadsnakes/ppa && apt-get update && apt-get install -y ${python} ${python}-venv`;
    const plan = planDockerfile(`FROM buildpack-deps:jammy\n${step("python3.11")}\n`, "Dockerfile");
    expect(plan.dockerfile).toContain(
      "software-properties-common && true && apt-get update && apt-get install -y python3.11 python3.11-venv\n",
    );
    expect(plan.substitutions).toEqual([
      "Dockerfile: line 1: FROM buildpack-deps:jammy -> localhost/bridle/buildpack-deps:jammy (Ubuntu 22.04 with gcc, make and libc headers)",
      "Dockerfile: line 2: add-apt-repository ppa:deadsnakes/ppa -> left out: Launchpad is not reachable from builds; the packages it is added for come from Ubuntu 22.04's own archive (python3.10 is there, and python3.11)",
    ]);
    const other = planDockerfile(`FROM ubuntu:22.04\n${step("python3.9")}\n`, "Dockerfile");
    const built = other.lines.find((l) => l.line === 2)?.built ?? "";
    const output = [
      `STEP 4/4: ${built}`,
      "E: Unable to locate package python3.9",
      "E: Couldn't find any package",
    ].join("\n");
    expect(buildFailure(output, other, "Dockerfile").message).toMatch(
      /line 2: .*: failed: python3\.9 comes from ppa:deadsnakes\/ppa, on Launchpad, which builds cannot reach; the archive of the base standing in for the image does not have it$/,
    );
    // Only images from before PEP 668 let pip install into the system: not Ubuntu 24.04 or Debian 12.
    // Ubuntu 22.04 is itself here, so it needs no help.
    for (const [from, before] of [
      ["ubuntu:20.04", true],
      ["ubuntu:22.04", false],
      ["debian:bullseye-slim", true],
      ["debian:11", true],
      ["ubuntu:24.04", false],
      ["debian:12", false],
      ["ubuntu", false],
      ["python:3.11", false],
    ] as const)
      expect(planDockerfile(`FROM ${from}\n`).dockerfile.includes("EXTERNALLY-MANAGED"), from).toBe(before);
  });

  it("refuses an image it has no base for, naming the line, and a Dockerfile without FROM", () => {
    for (const from of ["ghcr.io/acme/tool:1", "alpine:3.20", "nvidia/cuda:12.4.0-base-ubuntu22.04"]) {
      const err = (() => {
        try {
          planDockerfile(`# header\n\nFROM ${from}\nRUN true\n`);
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(ImageBuildError);
      expect((err as ImageBuildError).line).toBe(3);
      expect((err as Error).message).toContain(`line 3: FROM ${from}: no image registry is reachable`);
    }
    expect(() => planDockerfile("RUN true\n")).toThrow(/no FROM line/);
  });
});

// Real builds on podman (the engine Bridle's bootstrap installs), in the install folder's image
// home, so the base image built from Debian's packages is made once per machine.
const home = resolve(
  process.env.BRIDLE_HOME ?? join(import.meta.dirname, "..", "..", "..", ".bridle"),
  "containers",
);
const images = new EnvironmentImages({ home });

describe("EnvironmentImages on podman", () => {
  let host: string;
  beforeAll(async () => {
    // The test command's bootstrap installs podman and mmdebstrap; without them this says which is missing.
    const why = await images.unavailable();
    if (why) throw new Error(`images cannot be built here: ${why}`);
    host = await mkdtemp(join(tmpdir(), "bridle-images-"));
  });
  afterAll(async () => rm(host, { recursive: true, force: true }));

  it("builds a Dockerfile once, and an image sandbox runs on it with the agent's changes handed over, packed, to the verifier's", async () => {
    const context = join(host, "ctx");
    await mkdir(context);
    await writeFile(
      join(context, "app.py"),
      'import os\nprint(os.environ["GREETING"], open("/srv/data/seed.txt").read().strip())\n',
    );
    const dockerfile = [
      "FROM python:3.11-slim",
      "ENV GREETING=hello",
      "RUN mkdir -p /srv/data && echo seeded | tee /srv/data/seed.txt",
      "WORKDIR /workspace",
      "COPY app.py /workspace/app.py",
    ].join("\n");
    const image = await images.build(dockerfile, context, "environment/Dockerfile");
    expect(image.workdir).toBe("/workspace");
    expect(image.env.GREETING).toBe("hello");
    expect(existsSync(join(image.rootfs, "workspace", "app.py"))).toBe(true);
    const again = await images.build(dockerfile, context, "environment/Dockerfile");
    expect(again).toMatchObject({ digest: image.digest, buildSeconds: 0 });
    // The unpacked copy is the image: the engine keeps no second copy of its layers, and its files
    // are links to the one copy that every image unpacked here shares.
    const engineImages = execFileSync("podman", ["images", "--format", "{{.Repository}}:{{.Tag}}"], {
      encoding: "utf8",
      env: {
        ...process.env,
        CONTAINERS_CONF: join(home, "containers.conf"),
        CONTAINERS_STORAGE_CONF: join(home, "storage.conf"),
      },
    });
    expect(engineImages).not.toContain(image.tag);
    const python = await stat(join(image.rootfs, "usr", "bin", "python3.11"));
    expect(python.nlink).toBeGreaterThanOrEqual(2);

    const agent = await Sandbox.create({
      environmentDir: join(image.rootfs, "workspace"),
      baseDir: host,
      workdir: "/workspace",
      image,
    });
    let verifier: Sandbox | undefined;
    try {
      const r = await agent.run(
        [
          "bash",
          "-c",
          // Adds a file, deletes one of the image's (a whiteout) and replaces a folder (opaque).
          "python3 app.py && cat /etc/debian_version && echo tuned > /etc/agent.conf && echo out > result.txt" +
            " && rm /etc/debian_version && rm -r /srv/data && mkdir /srv/data && echo new > /srv/data/other.txt",
        ],
        { timeoutMs: 30_000 },
      );
      expect(r.stderr).toBe("");
      expect(r.stdout).toMatch(/^hello seeded\n12\.\d+\n$/);
      expect(await readFile(join(agent.workspace, "result.txt"), "utf8")).toBe("out\n");
      // The agent's change outside the workspace is in its own layer, never in the image.
      expect(existsSync(join(image.rootfs, "etc", "agent.conf"))).toBe(false);
      // As the runner hands a finished agent phase to the verifier: both folders packed, then unpacked.
      verifier = await Sandbox.create({
        environmentArchive: packFolder(agent.workspace),
        baseDir: host,
        workdir: "/workspace",
        image,
        changesArchive: packFolder(agent.changes!),
      });
      const v = await verifier.run(
        [
          "bash",
          "-c",
          "cat /etc/agent.conf result.txt; ls /srv/data; test -e /etc/debian_version || echo deleted; echo mine > /etc/verifier.conf",
        ],
        { timeoutMs: 30_000 },
      );
      expect(v.stdout).toBe("tuned\nout\nother.txt\ndeleted\n");
      expect(existsSync(join(agent.changes!, "etc", "verifier.conf"))).toBe(false);
    } finally {
      await agent.dispose();
      await verifier?.dispose();
    }
  }, 600_000);

  it("keeps an image sandbox's root inside: no host folders, no mounts, no network, the image untouched; localhost resolves", async () => {
    const context = join(host, "ctx-escape");
    await mkdir(context);
    const image = await images.build("FROM debian:12\nWORKDIR /app\n", context, "environment/Dockerfile");
    const box = await Sandbox.create({ baseDir: host, workdir: "/app", image });
    try {
      const probe = [
        `ls ${JSON.stringify(host)} 2>&1 | head -1`,
        "mount -t tmpfs none /mnt 2>&1 | head -1",
        "(exec 3<>/dev/tcp/1.1.1.1/80) 2>&1 | head -1",
        "ls /proc | grep -cE '^[0-9]+$'",
        "rm -rf /usr/bin/apt && echo removed",
        // As in a container, whose engine writes its /etc/hosts (the image's is empty).
        "getent hosts localhost sandbox | tr -s ' \t' ' ' | paste -sd,",
      ].join("; ");
      const r = await box.run(["bash", "-c", probe], { timeoutMs: 30_000 });
      const [hostDir = "", mount = "", net = "", processes = "", removed = "", hosts = ""] = r.stdout
        .trim()
        .split("\n");
      expect(hosts).toBe("::1 localhost ip6-localhost ip6-loopback,127.0.1.1 sandbox");
      expect(hostDir).toMatch(/No such file or directory/);
      expect(mount).toMatch(/permission denied|must be superuser|not permitted/i);
      expect(net).toMatch(/Network is unreachable|Connection refused|No route/);
      expect(Number(processes)).toBeLessThan(10);
      // Root may change its system, as in a container: in its own layer, never in the image.
      expect(removed).toBe("removed");
      expect(existsSync(join(image.rootfs, "usr", "bin", "apt"))).toBe(true);
    } finally {
      await box.dispose();
    }
  }, 600_000);

  it("runs every command beside the image's ENTRYPOINT, as an engine execs into a container, once what it starts listens", async () => {
    // As Harbor's hello-healthcheck: the entrypoint serves, then sleeps instead of running its
    // command, and deletes itself (as some tasks hide their setup); its log is kept apart.
    const context = join(host, "ctx-entrypoint");
    await mkdir(context);
    await writeFile(
      join(context, "start.sh"),
      [
        "#!/bin/sh",
        "echo starting",
        "cd /srv/www && python3 -m http.server 8080 --bind 127.0.0.1 >/dev/null 2>&1 &",
        'rm -f -- "$0"',
        "exec sleep infinity",
        "",
      ].join("\n"),
    );
    const image = await images.build(
      [
        "FROM debian:12",
        "RUN mkdir -p /srv/www && echo served > /srv/www/index.txt",
        "COPY start.sh /srv/start.sh",
        "RUN chmod +x /srv/start.sh",
        'ENTRYPOINT ["/srv/start.sh"]',
      ].join("\n"),
      context,
      "environment/Dockerfile",
    );
    expect(image.entrypoint).toEqual(["/srv/start.sh"]);
    const box = await Sandbox.create({ baseDir: host, image });
    try {
      const served = await box.run(
        ["bash", "-c", "curl -s http://localhost:8080/index.txt; cat /tmp/bridle-entrypoint.log"],
        { timeoutMs: 20_000 },
      );
      expect(served).toMatchObject({ exitCode: 0, timedOut: false, stdout: "served\nstarting\n" });
      // The entrypoint deleted itself in this sandbox's layer: the next run passes it over at once.
      const started = performance.now();
      const next = await box.run(["bash", "-c", "echo ran; cat /tmp/bridle-entrypoint.log"], {
        timeoutMs: 20_000,
      });
      expect(next).toMatchObject({ exitCode: 0, timedOut: false });
      expect(next.stdout).toMatch(/^ran\n.*start\.sh.*not found/s);
      expect(performance.now() - started).toBeLessThan(2_000);
      expect(existsSync(join(image.rootfs, "srv", "start.sh"))).toBe(true);
    } finally {
      await box.dispose();
    }
  }, 600_000);

  it("stands uv from PyPI in for uv's installer, which builds cannot download, where the installer would put it", async () => {
    const context = join(host, "ctx-uv");
    await mkdir(context);
    const dockerfile = [
      "FROM ubuntu:24.04",
      "RUN curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh && . $HOME/.local/bin/env && uv --version > /uv-version",
      "RUN wget -qO- https://astral.sh/uv/0.9.5/install.sh | env UV_INSTALL_DIR=/usr/local/bin sh",
      // As uv's documentation installs it: from uv's image, which builds cannot pull.
      "COPY --from=ghcr.io/astral-sh/uv:0.9.5 /uv /uvx /opt/uv/",
      "RUN /opt/uv/uv --version > /uv-image-version",
      // uv reaching PyPI itself, through the host's TLS proxy where it has one.
      "RUN /opt/uv/uv pip install --system --break-system-packages --no-deps six==1.17.0",
    ].join("\n");
    const image = await images.build(dockerfile, context, "environment/Dockerfile");
    expect(await readFile(join(image.rootfs, "uv-version"), "utf8")).toMatch(/^uv 0\.9\.5\b/);
    expect(await readFile(join(image.rootfs, "uv-image-version"), "utf8")).toMatch(/^uv 0\.9\.5\b/);
    expect(existsSync(join(image.rootfs, "opt", "uv", "uvx"))).toBe(true);
    // uv carries roots of its own: told to trust the system's, which hold the host's own authorities.
    const own = (await readdir("/usr/local/share/ca-certificates").catch(() => [])).some((n) =>
      n.endsWith(".crt"),
    );
    expect(image.env.UV_SYSTEM_CERTS).toBe(own ? "true" : undefined);
    expect(image.env.UV_NATIVE_TLS).toBe(own ? "true" : undefined);
    expect(existsSync(join(image.rootfs, "usr", "local", "bin", "uvx"))).toBe(true);
    // What apt's recommends bring with git, which the base has installed already: a solution's patch -p1.
    expect(existsSync(join(image.rootfs, "usr", "bin", "patch"))).toBe(true);
    expect(image.substitutions).toEqual([
      "environment/Dockerfile: line 4: ghcr.io/astral-sh/uv:0.9.5 -> uv==0.9.5 from PyPI, laid out as uv's image has it (/uv, /uvx; ghcr.io is not reachable from builds)",
      expect.stringMatching(/^environment\/Dockerfile: line 1: FROM ubuntu:24.04 -> /),
      "environment/Dockerfile: line 2: curl -LsSf https://astral.sh/uv/0.9.5/install.sh -> uv==0.9.5 from PyPI, installed as its installer would (astral.sh is not reachable from builds)",
      "environment/Dockerfile: line 3: wget -qO- https://astral.sh/uv/0.9.5/install.sh -> uv==0.9.5 from PyPI, installed as its installer would (astral.sh is not reachable from builds)",
    ]);
  }, 600_000);

  it("builds node:20 as Docker Hub's: the Node project's Node.js 20 and npm in /usr/local, npm trusting the system's authorities", async () => {
    const context = join(host, "ctx-node");
    await mkdir(context);
    const image = await images.build(
      "FROM node:20-bookworm-slim\nRUN node --version > /node-version && npm --version > /npm-version && npm config get cafile > /npm-cafile\n",
      context,
      "environment/Dockerfile",
    );
    expect(await readFile(join(image.rootfs, "node-version"), "utf8")).toMatch(/^v20\.\d+\.\d+\n$/);
    expect(await readFile(join(image.rootfs, "npm-version"), "utf8")).toMatch(/^10\.\d+\.\d+\n$/);
    expect(await readFile(join(image.rootfs, "npm-cafile"), "utf8")).toBe(
      "/etc/ssl/certs/ca-certificates.crt\n",
    );
    expect(existsSync(join(image.rootfs, "usr", "local", "bin", "npx"))).toBe(true);
    // NodeSource's way on Ubuntu: its setup script, then apt's nodejs, which keeps the line asked for.
    const nodesource = await images.build(
      [
        "FROM ubuntu:22.04",
        "RUN curl -fsSL https://deb.nodesource.com/setup_20.x -o /tmp/nodesource_setup.sh && bash /tmp/nodesource_setup.sh",
        "RUN apt-get update && apt-get install -y nodejs && node --version > /node-version && npm --version > /npm-version",
      ].join("\n"),
      context,
      "environment/Dockerfile",
    );
    expect(await readFile(join(nodesource.rootfs, "node-version"), "utf8")).toMatch(/^v20\.\d+\.\d+\n$/);
    expect(await readFile(join(nodesource.rootfs, "npm-version"), "utf8")).toMatch(/^10\.\d+\.\d+\n$/);
    expect(nodesource.substitutions.find((n) => n.includes("nodesource"))).toMatch(
      /^environment\/Dockerfile: line 2: curl -fsSL https:\/\/deb\.nodesource\.com\/setup_20\.x -o \/tmp\/nodesource_setup\.sh -> Node\.js 20\.\d+\.\d+ and npm 10\.\d+\.\d+, the Node project's build from the npm registry, installed as NodeSource's nodejs package would be/,
    );
  }, 600_000);

  it("builds ubuntu:24.04 as itself, from Ubuntu's archive: its release, its python3 3.12, apt reaching its archive", async () => {
    const context = join(host, "ctx-ubuntu");
    await mkdir(context);
    const image = await images.build(
      "FROM ubuntu:24.04\nRUN apt-get update && apt-get install -y --no-install-recommends hello && hello > /hello\n",
      context,
      "environment/Dockerfile",
    );
    expect(image.substitutions[0]).toBe(
      "environment/Dockerfile: line 1: FROM ubuntu:24.04 -> localhost/bridle/ubuntu:24.04 (Ubuntu 24.04)",
    );
    const release = await readFile(join(image.rootfs, "usr", "lib", "os-release"), "utf8");
    expect(release).toMatch(/^VERSION_ID="24\.04"$/m);
    expect(release).toMatch(/^ID=ubuntu$/m);
    expect(await readFile(join(image.rootfs, "hello"), "utf8")).toBe("Hello, world!\n");
    expect(existsSync(join(image.rootfs, "usr", "bin", "python3.12"))).toBe(true);
    // As on Ubuntu 24.04, pip refuses the system's Python (PEP 668).
    expect(existsSync(join(image.rootfs, "usr", "lib", "python3.12", "EXTERNALLY-MANAGED"))).toBe(true);
  }, 600_000);

  it("builds python:3.13-slim on Debian 13's python3 3.13, where pip upgrades what Debian's packages installed as it would its own", async () => {
    const context = join(host, "ctx-python");
    await mkdir(context);
    // Debian 13's pip brings typing_extensions 4.13 as a package of Debian's (no RECORD of pip's);
    // a newer pin, as datasets and many others ask, replaces it, as in Docker Hub's image.
    const image = await images.build(
      'FROM python:3.13-slim\nRUN pip install typing_extensions==4.14.1 && python -c "import sys, typing_extensions as t; print(sys.version_info[:2], t.__file__)" > /python\n',
      context,
      "environment/Dockerfile",
    );
    expect(image.substitutions[0]).toBe(
      "environment/Dockerfile: line 1: FROM python:3.13-slim -> localhost/bridle/python:3.13 (Debian 13 with its python3 3.13, pip installing system-wide)",
    );
    expect(await readFile(join(image.rootfs, "python"), "utf8")).toBe(
      "(3, 13) /usr/local/lib/python3.13/dist-packages/typing_extensions.py\n",
    );
  }, 600_000);

  it("runs a command as a user of the image, as `docker exec --user`: its ids, home and no capabilities, the workspace's owners kept", async () => {
    const context = join(host, "ctx-user");
    await mkdir(context);
    // Harbor's hello-user: the agent runs as `agent`, who owns /app.
    const image = await images.build(
      "FROM ubuntu:24.04\nRUN useradd --create-home --shell /bin/bash agent\nRUN mkdir -p /app && chown agent:agent /app\nWORKDIR /app\n",
      context,
      "environment/Dockerfile",
    );
    const box = await Sandbox.create({
      baseDir: host,
      image,
      workdir: "/app",
      environmentDir: join(image.rootfs, "app"),
    });
    try {
      const uid = Number(
        (await readFile(join(image.rootfs, "etc", "passwd"), "utf8")).match(/^agent:[^:]*:(\d+):/m)?.[1],
      );
      expect(uid).toBeGreaterThan(0);
      expect((await stat(box.workspace)).uid).toBe(uid);
      const script =
        'whoami; echo "$HOME"; grep CapEff /proc/self/status; touch /app/mine /tmp/mine && echo wrote; touch /etc/theirs 2>/dev/null || echo "not root"';
      const run = await box.run(["bash", "-c", script], { timeoutMs: 30_000, user: "agent" });
      expect(run.stderr).toBe("");
      expect(run.stdout).toBe("agent\n/home/agent\nCapEff:\t0000000000000000\nwrote\nnot root\n");
      expect((await stat(join(box.workspace, "mine"))).uid).toBe(uid);
      // By uid too; root by default; a user the image lacks is refused before anything runs.
      expect((await box.run(["whoami"], { timeoutMs: 30_000, user: uid })).stdout).toBe("agent\n");
      expect((await box.run(["whoami"], { timeoutMs: 30_000 })).stdout).toBe("root\n");
      await expect(box.run(["true"], { timeoutMs: 30_000, user: "nobody-here" })).rejects.toThrow(
        "user nobody-here: not in the image's /etc/passwd",
      );
    } finally {
      await box.dispose();
    }
  }, 600_000);

  it("builds a Go that a Dockerfile downloads from Go's site from the system's own, where it unpacks it", async () => {
    const context = join(host, "ctx-go-download");
    await mkdir(context);
    const image = await images.build(
      'FROM ubuntu:24.04\nRUN curl -L "https://go.dev/dl/go1.22.5.linux-amd64.tar.gz" -o go.tar.gz && tar -C /usr/local -xzf go.tar.gz && rm go.tar.gz\nENV PATH="/usr/local/go/bin:$PATH"\nRUN go version > /go-version && go env GOROOT GOTOOLCHAIN > /go-env\n',
      context,
      "environment/Dockerfile",
    );
    expect(await readFile(join(image.rootfs, "go-version"), "utf8")).toMatch(
      /^go version go1\.22\.\d+ linux\/amd64\n$/,
    );
    expect(await readFile(join(image.rootfs, "go-env"), "utf8")).toBe("/usr/local/go\nlocal\n");
    // The archive alone stays, as Go's own would: not the package it was packed from.
    expect(existsSync(join(image.rootfs, "usr", "lib", "go-1.22"))).toBe(false);
  }, 600_000);

  it("builds golang:1.22 as Docker Hub's: Go 1.22 at /usr/local/go, GOPATH /go, no toolchain download", async () => {
    const context = join(host, "ctx-go");
    await mkdir(context);
    await writeFile(join(context, "go.mod"), "module example.com/hello\n\ngo 1.22\n");
    await writeFile(
      join(context, "main.go"),
      'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n',
    );
    const image = await images.build(
      "FROM golang:1.22-bookworm\nWORKDIR /src\nCOPY . .\nRUN go build -o /usr/local/bin/hello . && go version > /go-version && go env GOPATH GOTOOLCHAIN > /go-env\n",
      context,
      "environment/Dockerfile",
    );
    expect(await readFile(join(image.rootfs, "go-version"), "utf8")).toMatch(
      /^go version go1\.22\.\d+ linux\//,
    );
    expect(await readFile(join(image.rootfs, "go-env"), "utf8")).toBe("/go\nlocal\n");
    expect(image.env.PATH?.split(":").slice(0, 2)).toEqual(["/go/bin", "/usr/local/go/bin"]);
    const box = await Sandbox.create({
      baseDir: host,
      image,
      workdir: "/src",
      environmentDir: join(image.rootfs, "src"),
    });
    try {
      const r = await box.run(["bash", "-c", "hello && go vet ./... && echo vetted"], { timeoutMs: 60_000 });
      expect(r, r.stderr).toMatchObject({ exitCode: 0, stdout: "hello\nvetted\n" });
    } finally {
      await box.dispose();
    }
  }, 600_000);

  it("fails a RUN whose download fails inside a pipe, naming the Dockerfile line", async () => {
    const context = join(host, "ctx-fail");
    await mkdir(context);
    const dockerfile = "FROM debian:12\nRUN echo ok\nRUN curl -fsS http://127.0.0.1:9/install.sh | sh\n";
    const err = await images.build(dockerfile, context, "environment/Dockerfile").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageBuildError);
    expect((err as ImageBuildError).line).toBe(3);
    expect((err as Error).message).toMatch(/^environment\/Dockerfile: line 3: RUN curl -fsS .*: failed: /);
  }, 600_000);

  it("runs a task's services on their images, each ready before the next, reached by name from a sandbox on their network", async () => {
    const context = join(host, "service");
    await mkdir(context, { recursive: true });
    await writeFile(
      join(context, "serve.sh"),
      'printf "%s" "$WORD" > word.txt\nexec python3 -m http.server 8080 --bind 127.0.0.1\n',
    );
    const image = await images.build(
      'FROM python:3.11-slim\nWORKDIR /srv/notes\nCOPY serve.sh /serve.sh\nCMD ["sh", "/serve.sh"]\n',
      context,
      "notes/Dockerfile",
    );
    expect(image.cmd).toEqual(["sh", "/serve.sh"]);
    const ready = [
      "python3",
      "-c",
      "import urllib.request; urllib.request.urlopen('http://localhost:8080/', timeout=2)",
    ];
    const services = await TaskServices.start(
      [
        {
          name: "notes",
          image,
          command: null,
          env: { WORD: "lighthouse" },
          healthcheck: ready,
          memoryMb: 256,
        },
      ],
      { baseDir: host },
    );
    const client = await Sandbox.create({ baseDir: host, network: services.network });
    try {
      const fetched = await client.run(
        [
          "python3",
          "-c",
          "import urllib.request; print(urllib.request.urlopen('http://notes:8080/word.txt').read().decode())",
        ],
        { timeoutMs: 20_000 },
      );
      expect(fetched.stderr).toBe("");
      expect(fetched.stdout.trim()).toBe("lighthouse");
    } finally {
      await client.dispose();
      await services.stop();
    }
    expect(existsSync(services.network.path)).toBe(false);

    // One that ends before it is ready is named, with its last words; nothing of it is left.
    const broken = TaskServices.start(
      [
        {
          name: "notes",
          image,
          command: ["sh", "-c", "echo no config >&2; exit 3"],
          env: {},
          healthcheck: ready,
        },
      ],
      { baseDir: host },
    );
    await expect(broken).rejects.toThrow(/^service notes ended before it was ready \(exit 3\): no config$/);
    await expect(broken).rejects.toBeInstanceOf(ServiceStartError);
  }, 600_000);
});
