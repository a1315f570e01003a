import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { StepProgress, TrainerWorkerInfo } from "@bridle/contracts";
import { type Logger, RestartPolicy, repoRoot, ServiceError, stackMarkEnv } from "@bridle/service-kit";

export interface WorkerOptions {
  python: string;
  modelDir: string;
  dataDir: string;
  device: string;
  /** Matmul number format: bf16 where the CPU has AMX or AVX512-BF16, fp32 elsewhere. */
  precision?: "fp32" | "bf16";
  restartDelayMs: number;
  log: Logger;
}

interface Pending {
  id: string;
  resolve: (result: unknown) => void;
  reject: (err: Error) => void;
  onProgress: (progress: StepProgress) => void;
}

type WorkerEvent =
  | { type: "ready"; device: string; vocabSize: number; maxTokens: number }
  | { type: "progress"; id: string; phase: StepProgress["phase"]; done: number; total: number }
  | { type: "result"; id: string; result: unknown }
  | { type: "error"; id: string | null; error: { status: number; code: string; message: string } };

/**
 * Spawns the resident Python trainer and keeps it alive: JSON lines on stdin/stdout (see
 * `services/trainer/python/bridle_trainer/worker.py`), stderr into the log. When it dies, the step in flight
 * fails as retryable `worker_crashed` and a new worker starts after a short delay.
 */
export class TrainerWorker {
  private child: ChildProcess | undefined;
  private pending: Pending | undefined;
  private stopping = false;
  /** The step in flight was cancelled: the worker's exit is expected, not a crash. */
  private cancelling = false;
  private readyWaiters: (() => void)[] = [];
  private counter = 0;
  private stderrTail: string[] = [];
  /** The wait grows while the worker dies before it is ready (a bad model path), so it cannot spin. */
  private readonly restartPolicy: RestartPolicy;
  readonly info: TrainerWorkerInfo & { maxTokens: number | null } = {
    state: "stopped",
    pid: null,
    device: null,
    vocabSize: null,
    maxTokens: null,
    restarts: 0,
  };

  constructor(private readonly options: WorkerOptions) {
    this.restartPolicy = new RestartPolicy({ initialMs: options.restartDelayMs, maxMs: 60_000 });
  }

  start(): void {
    const { python, modelDir, dataDir, device, log, precision = "fp32" } = this.options;
    this.info.state = this.info.restarts > 0 ? "restarting" : "starting";
    const cwd = join(repoRoot, "services", "trainer", "python");
    const child = spawn(
      python,
      [
        "-m",
        "bridle_trainer",
        "--model",
        modelDir,
        "--data",
        dataDir,
        "--device",
        device,
        "--precision",
        precision,
      ],
      {
        cwd,
        env: {
          PATH: process.env.PATH ?? "/usr/bin:/bin",
          HOME: process.env.HOME ?? cwd,
          PYTHONPATH: cwd,
          PYTHONUNBUFFERED: "1",
          HF_HUB_OFFLINE: "1",
          TRANSFORMERS_OFFLINE: "1",
          // glibc serves blocks under its adaptive mmap threshold (up to 32 MB) from its heaps and
          // keeps them: a step's activations of 4 MB and more are mapped and returned when freed.
          // Replaying a real OpenCode step (7,230-token prompt): peak 8.6 GB instead of 9.8 GB,
          // 5.7 GB held after the passes instead of 8.8 GB, at the same speed.
          MALLOC_MMAP_THRESHOLD_: "4194304",
          ...stackMarkEnv(),
        },
        stdio: ["pipe", "pipe", "pipe"],
      },
    );
    this.child = child;
    this.info.pid = child.pid ?? null;
    log.info({ pid: child.pid, device, precision }, "trainer worker starting");
    createInterface({ input: child.stdout! }).on("line", (line) => this.onLine(line));
    createInterface({ input: child.stderr! }).on("line", (line) => {
      this.stderrTail = [...this.stderrTail.slice(-19), line];
      log.debug({ worker: line }, "worker stderr");
    });
    child.on("exit", (code, signal) => this.onExit(child, code, signal));
  }

  /** Resolves once the worker has loaded the model (the first start takes seconds). */
  ready(): Promise<void> {
    if (this.info.state === "ready") return Promise.resolve();
    return new Promise((resolve) => this.readyWaiters.push(resolve));
  }

  /** Sends one step; progress arrives through `onProgress`. Only one step runs at a time. */
  run(request: unknown, onProgress: (p: StepProgress) => void): Promise<unknown> {
    if (this.info.state !== "ready" || !this.child?.stdin) {
      return Promise.reject(
        new ServiceError(`worker is ${this.info.state}`, 503, "trainer_unavailable", true),
      );
    }
    const id = `s${++this.counter}`;
    this.info.state = "busy";
    const stdin = this.child.stdin;
    return new Promise((resolve, reject) => {
      this.pending = { id, resolve, reject, onProgress };
      stdin.write(`${JSON.stringify({ id, op: "step", request })}\n`);
    });
  }

  /**
   * Stops the step in flight. A step cannot be interrupted inside torch, so the worker process is
   * killed and started again (reloading the model); the step fails as `step_cancelled`. False when
   * no step is running.
   */
  cancel(): boolean {
    if (!this.pending || !this.child) return false;
    this.cancelling = true;
    this.child.kill("SIGKILL");
    return true;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    await exited;
  }

  private onLine(line: string): void {
    let event: WorkerEvent;
    try {
      event = JSON.parse(line) as WorkerEvent;
    } catch {
      this.options.log.warn({ line }, "worker wrote a line that is not JSON");
      return;
    }
    if (event.type === "ready") {
      Object.assign(this.info, {
        state: "ready",
        device: event.device,
        vocabSize: event.vocabSize,
        maxTokens: event.maxTokens,
      });
      this.options.log.info({ device: event.device, pid: this.info.pid }, "trainer worker ready");
      this.restartPolicy.up();
      for (const waiter of this.readyWaiters.splice(0)) waiter();
      return;
    }
    const pending = this.pending;
    if (!pending || event.id !== pending.id) return;
    if (event.type === "progress") {
      pending.onProgress({ phase: event.phase, done: event.done, total: event.total });
      return;
    }
    this.pending = undefined;
    this.info.state = "ready";
    if (event.type === "result") pending.resolve(event.result);
    else {
      const { status, code, message } = event.error;
      pending.reject(new ServiceError(message, status, code, status >= 500));
    }
  }

  private onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (child !== this.child) return;
    this.child = undefined;
    this.info.pid = null;
    const pending = this.pending;
    this.pending = undefined;
    const how = signal ? `signal ${signal}` : `exit code ${code}`;
    const cancelled = this.cancelling;
    this.cancelling = false;
    pending?.reject(
      cancelled
        ? new ServiceError(
            "the step was cancelled; the trainer worker restarts",
            409,
            "step_cancelled",
            false,
          )
        : new ServiceError(`the trainer worker stopped (${how}) mid-step`, 503, "worker_crashed", true),
    );
    if (this.stopping) {
      this.info.state = "stopped";
      return;
    }
    if (cancelled) {
      this.info.state = "restarting";
      this.info.restarts += 1;
      this.options.log.info("trainer worker stopped for a cancelled step; restarting");
      this.start();
      return;
    }
    const diedStarting = this.info.state === "starting" || this.info.state === "restarting";
    this.info.state = "restarting";
    this.info.restarts += 1;
    const delay = this.restartPolicy.died(diedStarting) ?? 0;
    const stderr = this.stderrTail.slice(-5);
    this.options.log.error({ code, signal, delay, stderr }, "trainer worker died; restarting");
    setTimeout(() => this.start(), delay).unref();
  }
}
