import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ImportResult } from "@bridle/contracts";
import { imagesFromTasks } from "@bridle/harbor";
import { EnvironmentImages } from "@bridle/sandbox";
import { ArtifactStore, callJson, createLogger } from "@bridle/service-kit";
import { loadStackConfig } from "@bridle/stack";
import { httpOk, type RunningProcess, spawnProcess, spawnScriptedUpstream } from "@bridle/testkit";
import { serve } from "@hono/node-server";
import { createRunnerApp } from "./app.ts";

const repo = fileURLToPath(new URL("../../..", import.meta.url));
const main = (service: string) => join(repo, "services", service, "src", "main.ts");

/** The test guard's admin token (the guard does not start without one). */
export const TEST_GUARD_ADMIN_TOKEN = "runner-test-guard-admin-token-0123";
export const guardAdminHeaders = { authorization: `Bearer ${TEST_GUARD_ADMIN_TOKEN}` };

/** A bundled task the tests and the bench have pi solve, and the fix the scripted model writes: the conformance check's own. */
export { CHECK_FIX as SLUGIFY_FIX, CHECK_TASK as SLUGIFY_TASK } from "@bridle/testkit";

/**
 * The rollout path for tests: the real guard, tasks and verifier services as processes, in front
 * of the scripted upstream (a TEST DOUBLE for the model server, so a harness's moves are known in
 * advance), and the runner app under test in this process.
 */
export async function startRolloutStack(basePort: number, taskDirs: string[]) {
  const data = mkdtempSync(join(tmpdir(), "bridle-runner-test-"));
  const processes: RunningProcess[] = [];
  const named = new Map<string, RunningProcess>();
  const service = async (name: string, port: number, env: Record<string, string>) => {
    const url = `http://127.0.0.1:${port}`;
    const proc = await spawnProcess(process.execPath, ["--import", "tsx", main(name)], {
      env: { PORT: String(port), LOG_LEVEL: "warn", ...env },
      ready: () => httpOk(`${url}/healthz`),
      timeoutMs: 60_000,
    });
    processes.push(proc);
    named.set(name, proc);
    return url;
  };
  try {
    const upstream = await spawnScriptedUpstream({ turns: [{ text: "ready" }], select: "conversation" });
    processes.push(upstream);
    named.set("upstream", upstream);
    const guardUrl = await service("guard", basePort, {
      GUARD_ADMIN_TOKEN: TEST_GUARD_ADMIN_TOKEN,
      UPSTREAM_URL: upstream.url,
      GUARD_DATA_DIR: join(data, "guard"),
    });
    // Tasks with a Dockerfile are built where the stack builds them (the install folder's image home).
    const imagesHome = join(loadStackConfig().home, "containers");
    const tasksUrl = await service("tasks", basePort + 1, {
      TASKS_DATA: join(data, "tasks"),
      IMAGES_HOME: imagesHome,
      HARNESS_CHECKS_DIR: join(data, "harness-checks"),
    });
    const verifierUrl = await service("verifier", basePort + 2, {
      TASKS_URL: tasksUrl,
      IMAGES_HOME: imagesHome,
    });
    for (const dir of taskDirs) {
      const imported = await callJson(`${tasksUrl}/v1/tasks/import`, {
        schema: ImportResult,
        body: { path: resolve(repo, "tasks", dir) }, // a bundled task's name, or a fixture's path
        timeoutMs: 300_000,
      });
      if (!imported.verdicts.every((v) => v.ok))
        throw new Error(`task import failed: ${JSON.stringify(imported)}`);
    }
    const home = loadStackConfig().home;
    /** A runner app in this process, listening on `port` (the verifier fetches the workspaces it hands over). */
    const runner = (port: number, dir: string, images: EnvironmentImages) => {
      const app = createRunnerApp({
        log: createLogger("runner", "warn"),
        artifacts: new ArtifactStore(join(dir, "artifacts"), `http://127.0.0.1:${port}/v1/artifacts`),
        tasksUrl,
        guardUrl,
        guardAdminToken: TEST_GUARD_ADMIN_TOKEN,
        verifierUrl,
        dataDir: dir,
        install: { npmRoot: join(home, "harnesses", "node_modules"), hermesVenv: join(home, "hermes-venv") },
        images,
        maxConcurrent: 4,
      });
      return { app, server: serve({ fetch: app.fetch, hostname: "127.0.0.1", port }) };
    };
    const { app, server } = runner(
      basePort + 3,
      join(data, "runner"),
      new EnvironmentImages({ home: imagesHome }),
    );
    const others: ReturnType<typeof runner>[] = [];
    return {
      app,
      /** This runner's data folder (its rollouts' logs and results, its sandboxes). */
      dataDir: join(data, "runner"),
      /** Where the tasks service keeps harness versions' conformance checks, which runners read there. */
      harnessChecksDir: join(data, "harness-checks"),
      upstreamUrl: upstream.url,
      guardUrl,
      /** Replaces the scripted model's replies (each conversation gets turn N at its Nth reply). */
      async script(turns: unknown[]) {
        const res = await fetch(`${upstream.url}/_scripted/script`, {
          method: "PUT",
          body: JSON.stringify({ turns, select: "conversation" }),
        });
        if (!res.ok) throw new Error(`script rejected: ${await res.text()}`);
      },
      /**
       * Another runner, as on a host that has built no image: its image home starts empty and
       * fetches from the tasks service. Returns its app and that home.
       */
      otherHostRunner() {
        const imagesHome = join(data, "other-host-images");
        const other = runner(
          basePort + 4,
          join(data, "other-host-runner"),
          new EnvironmentImages({ home: imagesHome, source: imagesFromTasks(tasksUrl) }),
        );
        others.push(other);
        return { app: other.app, imagesHome };
      },
      /** Stops one process of the stack for good (to take a service or the model server down). */
      async kill(name: "upstream" | "guard" | "tasks" | "verifier") {
        await named.get(name)?.stop();
      },
      async stop() {
        for (const s of [server, ...others.map((o) => o.server)])
          await new Promise((resolve) => s.close(resolve));
        for (const p of processes.reverse()) await p.stop();
        if (!process.env.BRIDLE_TEST_KEEP_DATA) rmSync(data, { recursive: true, force: true });
      },
    };
  } catch (err) {
    for (const p of processes.reverse()) await p.stop();
    throw err;
  }
}
