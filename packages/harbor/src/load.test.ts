import { cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findTaskDirs, loadTask, mcpServersOf, taskIdOf } from "./index.ts";

const suite = resolve(dirname(fileURLToPath(import.meta.url)), "../../../tasks");
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "bridle-load-"));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

const copy = async (name: string) => {
  await cp(join(suite, "repair-median"), join(dir, name), { recursive: true });
  return join(dir, name);
};

describe("loadTask", () => {
  it("keeps container build files out of the workspace and hashes the content", async () => {
    const task = await copy("with-dockerfile");
    await writeFile(join(task, "environment/Dockerfile"), "FROM debian\n");
    const loaded = await loadTask(task);
    if (!loaded.ok) throw new Error(loaded.problems.join("; "));
    expect(loaded.task.environment.map((f) => f.path)).toEqual(["stats.py"]);
    // The Dockerfile is kept to build (validation builds it where podman is installed), and what
    // running without its image means is said only when it is not built.
    expect(loaded.task.dockerfile).toMatchObject({
      name: "environment/Dockerfile",
      content: "FROM debian\n",
    });
    // The engine gets the whole folder as its context, as Docker does (a Dockerfile may COPY its .dockerignore).
    expect(loaded.task.dockerfile?.context.map((f) => f.path).sort()).toEqual(["Dockerfile", "stats.py"]);
    expect(loaded.task.dockerfile?.withoutImage).toContain(
      "environment/Dockerfile: not built; its WORKDIR, COPY and ADD lines place the workspace, run in bubblewrap with this host's tools",
    );
    expect(loaded.task.tests.map((f) => f.path).sort()).toEqual(["check.py", "test.sh"]);
    expect(loaded.task.hash).toMatch(/^[0-9a-f]{64}$/);
    await writeFile(join(task, "instruction.md"), "changed\n");
    const again = await loadTask(task);
    expect(again.ok && again.task.hash).not.toBe(loaded.task.hash);
  });

  it("takes a folder name as datasets and clones write it for the id, and says so", async () => {
    expect(taskIdOf("fix-git")).toBe("fix-git");
    expect(taskIdOf("R_package_dependency_missing_medium")).toBe("r_package_dependency_missing_medium");
    expect(taskIdOf("Owner+repo name")).toBe("owner-repo-name");
    expect(taskIdOf("_Task 1 (copy)")).toBe("task-1-copy");
    expect(taskIdOf("x".repeat(127) + "!y")).toBe("x".repeat(127));
    expect(taskIdOf("++")).toBe("");
    const loaded = await loadTask(await copy("Owner+Repair Median"));
    if (!loaded.ok) throw new Error(loaded.problems.join("; "));
    expect(loaded.task.id).toBe("owner-repair-median");
    expect(loaded.task.notes).toContain(
      'task id owner-repair-median: from the folder\'s name "Owner+Repair Median"',
    );
    const plain = await loadTask(await copy("repair-median"));
    expect(plain.ok && plain.task.notes.filter((n) => n.startsWith("task id"))).toEqual([]);
  });

  it("names each problem: a folder name without a letter or digit, links, empty instruction", async () => {
    const task = await copy("__");
    await symlink("/etc/passwd", join(task, "environment/passwd"));
    const linked = await loadTask(task);
    expect(linked.ok).toBe(false);
    if (!linked.ok) {
      expect(linked.problems[0]).toBe(
        "__: the folder's name has no letter or digit to make the task's id of",
      );
      expect(linked.problems[1]).toBe(
        "environment/passwd: not a regular file or folder (links are not allowed)",
      );
    }
    const online = await copy("online");
    await writeFile(
      join(online, "task.toml"),
      '[metadata]\ncategory = "build"\n[environment]\nallow_internet = true\n',
    );
    await writeFile(join(online, "instruction.md"), "  \n");
    const result = await loadTask(online);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.problems).toEqual(["instruction.md: empty"]);
    }
  });

  it("reads Harbor's task.toml as Harbor writes it: free metadata, sizes, newer keys kept and reported", async () => {
    const task = await copy("harbor-1-3");
    await writeFile(
      join(task, "task.toml"),
      [
        'schema_version = "1.3"',
        'artifacts = ["/app/out.log"]',
        "[task]",
        'name = "org/harbor-1-3"',
        "[[task.authors]]",
        'name = "Ada"',
        "[metadata]",
        'category = "Software Engineering"',
        'difficulty = "medium"',
        'tags = ["python"]',
        "expert_time_estimate_min = 10",
        "[verifier]",
        "timeout_sec = 120.0",
        "[agent]",
        "timeout_sec = 300.0",
        "[environment]",
        "build_timeout_sec = 600.0",
        'docker_image = "python:3.11-slim"',
        'memory = "2G"',
        'storage = "10G"',
        "cpus = 1",
        "allow_internet = true",
        'network_mode = "bridge"',
        'os = "linux"',
        "gpu_count = 0",
      ].join("\n"),
    );
    const loaded = await loadTask(task);
    if (!loaded.ok) throw new Error(loaded.problems.join("; "));
    expect(loaded.task.category).toBe("software-engineering");
    expect(loaded.task.toml.environment.memory_mb).toBe(2048);
    expect(loaded.task.toml.verifier.timeout_sec).toBe(120);
    expect(loaded.task.notes).toEqual([
      "task.toml: metadata.expert_time_estimate_min: not read by Bridle (kept)",
      "task.toml: environment.gpu_count: not read by Bridle (kept)",
      'task.toml: metadata.category: "Software Engineering" is not one of build, repair, extend, qa (kept as software-engineering)',
      "task.toml: environment.allow_internet: the sandbox has no network here; the task runs offline",
    ]);
  });

  it("takes a task.toml with no [metadata] at all, and refuses what cannot run here by name", async () => {
    const bare = await copy("bare-toml");
    await writeFile(join(bare, "task.toml"), 'version = "1.0"\n');
    const loaded = await loadTask(bare);
    expect(loaded.ok && [loaded.task.category, loaded.task.notes]).toEqual([
      "uncategorized",
      ["task.toml: metadata.category: absent (grouped as uncategorized)"],
    ]);
    const refusals = {
      '[environment]\nos = "windows"\n': "task.toml: environment.os: only Linux task environments run here",
      '[environment]\nmemory = "lots"\n':
        "task.toml: environment.memory: a size such as 2G, 512M or a number of megabytes",
      '[environment]\nmemory = "128G"\n': "task.toml: environment.memory: 131072 MB is outside 16..65536 MB",
      '[[steps]]\nname = "a"\n[[steps]]\nname = "a"\n':
        "task.toml: steps: step names must be unique (each names its folder under steps/)",
    };
    for (const [toml, problem] of Object.entries(refusals)) {
      await writeFile(join(bare, "task.toml"), toml);
      const refused = await loadTask(bare);
      expect(refused.ok || refused.problems).toEqual([problem]);
    }
    // A multi-step task has no root instruction, tests or solution: only its steps' lacks are named.
    const steps = await copy("multi-step");
    await writeFile(join(steps, "task.toml"), '[[steps]]\nname = "one"\n');
    for (const path of ["instruction.md", "tests", "solution"])
      await rm(join(steps, path), { recursive: true });
    const multi = await loadTask(steps);
    expect(multi.ok || multi.problems).toEqual([
      "steps/one/instruction.md: missing",
      "steps/one/tests/test.sh: missing, and the task has no shared tests/test.sh (the verifier runs it)",
    ]);
  });

  it("builds Harbor's prebuilt docker_image as a Dockerfile of its FROM line, unless the task has a Dockerfile", async () => {
    const prebuilt = await copy("prebuilt");
    await writeFile(join(prebuilt, "task.toml"), '[environment]\ndocker_image = "python:3.12-slim"\n');
    const loaded = await loadTask(prebuilt);
    expect(loaded.ok && loaded.task.dockerfile?.name).toBe("task.toml: environment.docker_image");
    expect(loaded.ok && loaded.task.dockerfile?.content).toBe("FROM python:3.12-slim\n");
    await mkdir(join(prebuilt, "environment"), { recursive: true });
    await writeFile(join(prebuilt, "environment", "Dockerfile"), "FROM debian:12\n");
    const both = await loadTask(prebuilt);
    expect(both.ok && both.task.dockerfile?.content).toBe("FROM debian:12\n");
    expect(both.ok && both.task.notes).toContain(
      "task.toml: environment.docker_image python:3.12-slim: no image registry is reachable to pull it; environment/Dockerfile is built instead",
    );
    await writeFile(join(prebuilt, "task.toml"), '[environment]\ndocker_image = "x:1\\nRUN rm -rf /"\n');
    const bad = await loadTask(prebuilt);
    expect(bad.ok || bad.problems).toEqual([
      "task.toml: environment.docker_image: an image reference such as ubuntu:24.04",
    ]);
  });

  it("reads a compose file that overrides the task's container, and the services beside it", async () => {
    const own = await copy("compose-main-only");
    await writeFile(join(own, "environment/docker-compose.yaml"), "services:\n  main:\n    shm_size: 1g\n");
    const ok = await loadTask(own);
    expect(ok.ok).toBe(true);
    if (ok.ok) expect(ok.task.environment.map((f) => f.path)).toEqual(["stats.py"]);

    // As harbor-cookbook's mcp-tools and multi-container recipes write it.
    const sidecar = await copy("compose-sidecar");
    await writeFile(
      join(sidecar, "environment/docker-compose.yaml"),
      'services:\n  main:\n    depends_on:\n      mcp-server:\n        condition: service_healthy\n  mcp-server:\n    build:\n      context: ./mcp-server\n    expose:\n      - "8000"\n',
    );
    await mkdir(join(sidecar, "environment/mcp-server"), { recursive: true });
    await writeFile(
      join(sidecar, "environment/mcp-server/Dockerfile"),
      'FROM python:3.12-slim\nCMD ["python", "-V"]\n',
    );
    const beside = await loadTask(sidecar);
    expect(beside.ok || beside.problems).toBe(true);
    if (beside.ok)
      expect(beside.task.services).toEqual([
        {
          name: "mcp-server",
          dockerfile: expect.objectContaining({
            name: "environment/mcp-server/Dockerfile",
            context: [expect.objectContaining({ path: "Dockerfile" })],
          }),
          command: null,
          env: {},
          healthcheck: null,
          memoryMb: null,
          cpus: null,
        },
      ]);
    // As Harbor's adapters write them: the engine's log mount and resource limits pass, the
    // environment folder may be named by Harbor's own variable; a volume of data does not.
    const adapter = await copy("compose-adapter");
    await mkdir(join(adapter, "environment/game"), { recursive: true });
    await writeFile(join(adapter, "environment/Dockerfile.game"), "FROM python:3.12-slim\n");
    await writeFile(
      join(adapter, "environment/docker-compose.yaml"),
      [
        "services:",
        "  main: {}",
        "  game:",
        "    build:",
        // biome-ignore lint/suspicious/noTemplateCurlyInString: compose's own variable, as Harbor writes it
        "      context: ${CONTEXT_DIR}",
        "      dockerfile: Dockerfile.game",
        "    volumes:",
        // biome-ignore lint/suspicious/noTemplateCurlyInString: compose's own variable, as Harbor writes it
        "      - ${HOST_AGENT_LOGS_PATH}:${ENV_AGENT_LOGS_PATH}",
        "    deploy:",
        "      resources:",
        "        limits:",
        "          memory: 1024M",
        "    healthcheck:",
        '      test: ["CMD-SHELL", "python3 -c \'print(1)\'"]',
        "",
      ].join("\n"),
    );
    const fromAdapter = await loadTask(adapter);
    expect(
      fromAdapter.ok &&
        fromAdapter.task.services.map((s) => [s.dockerfile.name, s.healthcheck, s.memoryMb, s.cpus]),
    ).toEqual([["environment/Dockerfile.game", ["/bin/sh", "-c", "python3 -c 'print(1)'"], 1024, null]]);
    await writeFile(
      join(adapter, "environment/docker-compose.yaml"),
      "services:\n  main: {}\n  db:\n    image: postgres:16\n    privileged: true\n    volumes:\n      - data:/var/lib/postgresql\n",
    );
    const data = await loadTask(adapter);
    expect(data.ok || data.problems).toEqual([
      "environment/docker-compose.yaml: services.db: privileged, volumes: not supported for a service beside the task's container (its build, image, command, environment and healthcheck are)",
    ]);
    // A service from nowhere is refused by name.
    const nowhere = await copy("compose-nowhere");
    await writeFile(
      join(nowhere, "environment/docker-compose.yaml"),
      "services:\n  main: {}\n  cache:\n    expose: [6379]\n",
    );
    const refused = await loadTask(nowhere);
    expect(refused.ok || refused.problems).toEqual([
      "environment/docker-compose.yaml: services.cache: neither a build nor an image to run it from",
    ]);

    const broken = await copy("compose-broken");
    await writeFile(join(broken, "environment/docker-compose.yaml"), "services: [unclosed\n");
    const bad = await loadTask(broken);
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.problems[0]).toMatch(/^environment\/docker-compose\.yaml: not valid YAML: /);

    // Harbor reads docker-compose.yaml alone: a docker-compose.yml is the task's own file, as in
    // TermiGen's tasks about fixing one, whose Dockerfile copies it into the image.
    const ymlTask = await copy("compose-yml");
    await writeFile(
      join(ymlTask, "environment/docker-compose.yml"),
      "services:\n  web:\n    image: nginx\n    volumes:\n      - ./site:/usr/share/nginx/html\n",
    );
    const yml = await loadTask(ymlTask);
    expect(yml.ok || yml.problems).toBe(true);
    if (yml.ok) {
      expect(yml.task.services).toEqual([]);
      expect(yml.task.environment.map((f) => f.path)).toContain("docker-compose.yml");
    }
  });

  it("reads [[environment.mcp_servers]] as Harbor writes them, for the harness, and refuses one it cannot reach", async () => {
    const task = await copy("mcp-servers");
    const toml = join(task, "task.toml");
    const base = await readFile(toml, "utf8");
    // As Harbor's hello-mcp writes it, with a stdio server beside it.
    await writeFile(
      toml,
      `${base}
[[environment.mcp_servers]]
name = "mcp-server"
transport = "streamable-http"
url = "http://mcp-server:8000/mcp"
args = []

[[environment.mcp_servers]]
name = "files"
command = "python3"
args = ["-m", "files_server"]
`,
    );
    const loaded = await loadTask(task);
    if (!loaded.ok) throw new Error(loaded.problems.join("; "));
    expect(mcpServersOf(loaded.task.toml)).toEqual([
      { name: "mcp-server", transport: "streamable-http", url: "http://mcp-server:8000/mcp" },
      { name: "files", transport: "stdio", command: "python3", args: ["-m", "files_server"] },
    ]);
    expect(loaded.task.notes).toContain(
      "task.toml: environment.mcp_servers: mcp-server (streamable-http, http://mcp-server:8000/mcp) is offered to the harness's MCP client (Claude Code, OpenCode and Hermes have one; pi has none)",
    );
    expect(loaded.task.notes.join("\n")).not.toMatch(/mcp_servers: not read/);

    await writeFile(toml, `${base}\n[[environment.mcp_servers]]\nname = "remote"\ntransport = "sse"\n`);
    const refused = await loadTask(task);
    expect(refused.ok || refused.problems).toEqual([
      "task.toml: environment.mcp_servers.0: remote: transport sse needs a url",
    ]);
  });

  it("reads a hack check, and refuses one that could be trained on", async () => {
    const check = await loadTask(join(suite, "repair-impossible-total"));
    expect(check.ok && [check.task.toml.metadata.impossible, check.task.splitOverride]).toEqual([
      true,
      "held-out",
    ]);
    const plain = await loadTask(join(suite, "repair-median"));
    expect(plain.ok && plain.task.toml.metadata.impossible).toBe(false);
    const trained = await copy("trained-hack-check");
    await writeFile(join(trained, "task.toml"), '[metadata]\ncategory = "repair"\nimpossible = true\n');
    const refused = await loadTask(trained);
    expect(refused.ok || refused.problems).toEqual([
      'task.toml: metadata.impossible: a hack check (impossible = true) must be held out: set split = "held-out"',
    ]);
  });

  it("finds a single task folder or the task folders at any depth below a folder", async () => {
    expect(await findTaskDirs(join(suite, "repair-median"))).toEqual([join(suite, "repair-median")]);
    const parent = join(dir, "parent");
    for (const task of [".hidden/t", "b", "a", "org/dataset/c", "empty/nothing"])
      await mkdir(join(parent, task), { recursive: true });
    for (const task of [".hidden/t", "b", "a", "org/dataset/c"])
      await writeFile(join(parent, task, "instruction.md"), "do it\n");
    // Files inside a task are not searched: its tests/ holds no task.
    await mkdir(join(parent, "a", "tests", "nested"), { recursive: true });
    await writeFile(join(parent, "a", "tests", "nested", "task.toml"), "");
    expect(await findTaskDirs(parent)).toEqual([
      join(parent, "a"),
      join(parent, "b"),
      join(parent, "org/dataset/c"),
    ]);
    await expect(findTaskDirs(join(dir, "missing"))).rejects.toThrow(/missing: not a folder/);
  });
});
