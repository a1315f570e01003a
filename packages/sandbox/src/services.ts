import type { BuiltImage } from "./images.ts";
import { imageWorkspace } from "./images.ts";
import { SharedNetwork } from "./network.ts";
import { type RunResult, Sandbox, workdirProblem } from "./sandbox.ts";

/** A service beside a task's container (a compose file's other service), ready to start. */
export interface ServiceSpec {
  /** Its name, by which the task's container reaches it. */
  name: string;
  image: BuiltImage;
  /** What it runs: compose's `command`, else the image's CMD (after its ENTRYPOINT either way). */
  command: string[] | null;
  env: Record<string, string>;
  /** A command that exits 0 once it is ready (compose's `healthcheck.test`); none: it is ready once it listens. */
  healthcheck: string[] | null;
  /** Its memory limit (MiB) and CPU limit; null: the sandbox's defaults. */
  memoryMb?: number | null;
  cpus?: number | null;
}

/** A service that did not come up: what it said, for the rollout's or the control's failure. */
export class ServiceStartError extends Error {}

/** How long a service may take to become ready, and how long one without a health check is given to listen. */
const READY_MS = 120_000;
const LISTEN_MS = 10_000;
/** Where a service whose image names no usable WORKDIR runs (a folder of its own, empty). */
const NO_WORKDIR = "/bridle-service";

/**
 * A task's services, each running in a sandbox of its own (its own image, processes and files)
 * on one shared network, as compose starts them: in order, each ready (its health check passes,
 * or it listens on a port) before the next. The task's own sandbox then joins `network`.
 * `stop` ends them all; whoever starts them stops them, whatever happens in between.
 */
export class TaskServices {
  private constructor(
    readonly network: SharedNetwork,
    private readonly running: { sandbox: Sandbox; stop: AbortController; done: Promise<RunResult> }[],
  ) {}

  static async start(
    specs: readonly ServiceSpec[],
    options: { baseDir?: string } = {},
  ): Promise<TaskServices> {
    const network = await SharedNetwork.create(specs.map((s) => s.name));
    const services = new TaskServices(network, []);
    try {
      for (const spec of specs) await services.startOne(spec, options.baseDir);
    } catch (err) {
      await services.stop();
      throw err;
    }
    return services;
  }

  private async startOne(spec: ServiceSpec, baseDir: string | undefined): Promise<void> {
    const workdir =
      spec.image.workdir && !workdirProblem(spec.image.workdir) ? spec.image.workdir : NO_WORKDIR;
    const start = workdir === NO_WORKDIR ? undefined : imageWorkspace(spec.image, workdir);
    // Its ENTRYPOINT is its command's start here, not a process beside it (see Sandbox.run).
    const argv = [...(spec.image.entrypoint ?? []), ...(spec.command ?? spec.image.cmd ?? [])];
    if (argv.length === 0)
      throw new ServiceStartError(
        `service ${spec.name}: no command (compose sets none and its image has no CMD)`,
      );
    const create = () =>
      Sandbox.create({
        image: { ...spec.image, entrypoint: null },
        workdir,
        network: this.network,
        ...(start ? { environmentDir: start } : {}),
        ...(baseDir ? { baseDir } : {}),
      });
    const sandbox = await create();
    const stop = new AbortController();
    const listening = await this.network.listeners();
    const done = sandbox.run(argv, {
      timeoutMs: 7 * 24 * 3600_000,
      signal: stop.signal,
      env: spec.env,
      ...(spec.memoryMb ? { memoryMb: spec.memoryMb } : {}),
      ...(spec.cpus ? { cpus: spec.cpus } : {}),
    });
    this.running.push({ sandbox, stop, done });
    let ended: RunResult | undefined;
    let broken: Error | undefined;
    done.then(
      (result) => {
        ended = result;
      },
      (err: Error) => {
        broken = err;
      },
    );
    // The health check runs beside the service as an engine's exec would: on its image and its
    // network, in a sandbox of its own (two runs cannot share one sandbox's writable layer).
    const probe = spec.healthcheck ? await create() : undefined;
    try {
      const deadline = Date.now() + (spec.healthcheck ? READY_MS : LISTEN_MS);
      let last = "";
      while (Date.now() < deadline) {
        if (broken) throw new ServiceStartError(`service ${spec.name} could not run: ${broken.message}`);
        if (ended)
          throw new ServiceStartError(
            `service ${spec.name} ended before it was ready (exit ${ended.exitCode ?? ended.signal}): ${tail(ended)}`,
          );
        if (probe && spec.healthcheck) {
          const check = await probe.run(spec.healthcheck, { timeoutMs: 10_000, env: spec.env });
          if (check.exitCode === 0) return;
          last = tail(check);
        } else if ((await this.network.listeners()) > listening) return;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      if (!spec.healthcheck) return; // Up, serving nothing that can be seen yet: as compose, go on.
      throw new ServiceStartError(
        `service ${spec.name}: its health check (${spec.healthcheck.join(" ")}) did not pass within ${READY_MS / 1000} s${last ? `: ${last}` : ""}`,
      );
    } finally {
      await probe?.dispose();
    }
  }

  /** Stops every service and ends the network. */
  async stop(): Promise<void> {
    for (const { stop } of this.running) stop.abort();
    for (const { sandbox, done } of this.running.splice(0)) {
      await done.catch(() => undefined);
      await sandbox.dispose();
    }
    await this.network.dispose();
  }
}

function tail(run: Pick<RunResult, "stdout" | "stderr">): string {
  const text = `${run.stderr}\n${run.stdout}`.trim().split("\n").slice(-3).join(" | ");
  return text.slice(-300) || "no output";
}
