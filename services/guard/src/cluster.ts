import cluster, { type Worker } from "node:cluster";
import type { CaptureRecord, Session, SessionRegistration } from "@bridle/contracts";
import { type Logger, RestartPolicy } from "@bridle/service-kit";
import { CaptureStore, END_WAIT_MS, type GuardStore, serializeRecord } from "./capture.ts";
import { CallsInFlight } from "./in-flight.ts";

/**
 * Several guard processes on one port (GUARD_WORKERS > 1). One core of guard carries about a
 * thousand fast answers a second; beside a GPU server with hundreds of concurrent rollouts that is
 * not enough, so the proxy runs in N worker processes sharing one listening socket and a primary
 * process owns what must be one: the sessions and the capture files. Workers cache sessions (they
 * never change once registered) and send each call's record to the primary as a ready JSONL line,
 * so the primary numbers and writes records but parses nothing. A read of a session's counts or
 * records first makes every worker answer a barrier message: a worker queues a record before it
 * ends the answer to the harness and sends what it has queued before answering the barrier, and
 * messages on one channel stay in order, so every call the harness has seen end is counted. Ending
 * a session sends the barrier with the session: each worker refuses its later calls and answers
 * once the calls it has under way for it are recorded.
 */

type Op = "lookupKey" | "session" | "register" | "counts" | "records" | "end" | "writeTrajectory";

/** Worker to primary. */
type Up =
  | { t: "call"; id: number; op: Op; args: unknown[] }
  | { t: "append"; records: Serialized[] }
  | { t: "barrier"; n: number };
/** One record as a JSONL line without `seq` (see serializeRecord). */
interface Serialized {
  sessionId: string;
  json: string;
  blocked: number;
}
/** A session being ended: workers mark it and answer the barrier once its calls under way are recorded. */
interface Ending {
  id: string;
  apiKey: string;
  endedAt: string;
}
/** Primary to worker. */
type Down =
  | { t: "reply"; id: number; ok: true; value: unknown }
  | { t: "reply"; id: number; ok: false; message: string }
  | { t: "barrier"; n: number; end?: Ending };

/** A worker that dies within its first moments, or this many times a minute, stops the guard. */
const MAX_RESTARTS_PER_MINUTE = 10;
const BARRIER_TIMEOUT_MS = 5_000;

/**
 * The primary: loads the sessions, forks the workers, answers their calls, replaces a worker that
 * dies, and on SIGTERM/SIGINT stops them all before closing the capture files.
 */
export async function runPrimary(options: { workers: number; dataDir: string; log: Logger }): Promise<void> {
  const { log } = options;
  const store = await CaptureStore.open(options.dataDir, log, { workers: options.workers });

  const listened = new Set<number>();
  // A worker is replaced at once; deaths faster than MAX_RESTARTS_PER_MINUTE are a crash loop.
  const restarts = new RestartPolicy({ initialMs: 0, maxMs: 0, maxPerMinute: MAX_RESTARTS_PER_MINUTE });
  const barriers = new Map<number, { left: Set<number>; finish: () => void }>();
  let barrierSeq = 0;
  let stopping = false;

  const live = () => Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w?.isConnected());

  /** Resolves once every live worker has answered (or died, or the wait ran out). */
  const barrier = (end?: Ending) =>
    new Promise<void>((resolve) => {
      const workers = live();
      if (workers.length === 0) return resolve();
      const n = ++barrierSeq;
      const left = new Set(workers.map((w) => w.id));
      const waitMs = BARRIER_TIMEOUT_MS + (end ? END_WAIT_MS : 0);
      const timer = setTimeout(() => {
        log.warn({ waitingFor: [...left], waitMs }, "workers did not answer a barrier in time");
        finish();
      }, waitMs);
      const finish = () => {
        clearTimeout(timer);
        barriers.delete(n);
        resolve();
      };
      barriers.set(n, { left, finish });
      for (const w of workers)
        w.send(
          { t: "barrier", n, ...(end ? { end } : {}) } satisfies Down,
          (err: Error | null) => err && arrived(w.id, n),
        );
    });
  const arrived = (worker: number, n: number) => {
    const b = barriers.get(n);
    if (!b) return;
    b.left.delete(worker);
    if (b.left.size === 0) b.finish();
  };

  const ops: Record<Op, (...args: never[]) => Promise<unknown>> = {
    lookupKey: (key: string) => store.lookupKey(key),
    session: (id: string) => store.session(id),
    register: (input: SessionRegistration & { apiKey: string; id: string }) => store.register(input),
    counts: async (id: string) => {
      await barrier();
      return store.counts(id);
    },
    records: async (id: string) => {
      await barrier();
      return store.records(id);
    },
    end: async (id: string) => {
      const session = await store.end(id);
      if (session?.endedAt) await barrier({ id, apiKey: session.apiKey, endedAt: session.endedAt });
      return session;
    },
    writeTrajectory: (id: string, trajectory: unknown) => store.writeTrajectory(id, trajectory),
  };

  const onMessage = (worker: Worker, message: Up) => {
    if (message.t === "append") {
      for (const { sessionId, json, blocked } of message.records) {
        store
          .appendSerialized(sessionId, json, blocked)
          .catch((err: unknown) => log.error({ err, sessionId }, "capture write failed"));
      }
    } else if (message.t === "barrier") {
      arrived(worker.id, message.n);
    } else if (message.t === "call") {
      const op = ops[message.op] as ((...args: unknown[]) => Promise<unknown>) | undefined;
      const reply = (down: Down) => {
        // The worker died while waiting: nobody to answer.
        if (worker.isConnected()) worker.send(down, () => undefined);
      };
      if (!op)
        return reply({ t: "reply", id: message.id, ok: false, message: `unknown operation ${message.op}` });
      op(...message.args).then(
        (value) => reply({ t: "reply", id: message.id, ok: true, value }),
        (err: unknown) =>
          reply({
            t: "reply",
            id: message.id,
            ok: false,
            message: err instanceof Error ? err.message : String(err),
          }),
      );
    }
  };

  const fork = () => {
    const worker = cluster.fork();
    worker.on("message", (message: Up) => onMessage(worker, message));
  };

  const shutdown = async (code: number) => {
    if (stopping) return;
    stopping = true;
    const workers = live();
    await Promise.all(
      workers.map(
        (w) =>
          new Promise<void>((resolve) => {
            if (w.isDead()) return resolve();
            const kill = setTimeout(() => w.process.kill("SIGKILL"), 6_000);
            w.once("exit", () => {
              clearTimeout(kill);
              resolve();
            });
            w.process.kill("SIGTERM");
          }),
      ),
    );
    await store.close();
    process.exit(code);
  };

  cluster.on("listening", (worker) => listened.add(worker.id));
  const replace = (worker: Worker, code: number, signal: string) => {
    if (stopping) return;
    if (!listened.has(worker.id)) {
      // It never served: a taken port or a bad setting, which every replacement would hit too.
      log.fatal({ worker: worker.id, code, signal }, "a guard worker exited before it could serve; stopping");
      return void shutdown(1);
    }
    if (restarts.died(false) === null) {
      log.fatal({ restarts: restarts.recentDeaths }, "guard workers keep dying; stopping");
      return void shutdown(1);
    }
    log.error({ worker: worker.id, code, signal }, "a guard worker died; starting another");
    fork();
  };
  cluster.on("exit", (worker, code, signal) => {
    for (const [n] of barriers) arrived(worker.id, n);
    // A worker that stopped cleanly was told to (SIGTERM or SIGINT): most often the whole process
    // group was, this process included, whose handler may not have run yet. Give it a moment.
    if (code === 0 && !signal) setTimeout(() => replace(worker, code, signal), 1_000);
    else replace(worker, code, signal);
  });
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.on(signal, () => {
      log.info({ signal }, "shutting down");
      void shutdown(0);
    });
  }

  // The kernel hands each new connection to a worker that is waiting for one: a busy worker takes
  // fewer. Node's round robin instead queues connections in the primary until the next worker in
  // turn acknowledges the last one, which under load keeps a burst of new connections (every
  // rollout of a step starting at once) waiting for seconds. NODE_CLUSTER_SCHED_POLICY=rr still
  // chooses round robin.
  if (!process.env.NODE_CLUSTER_SCHED_POLICY) cluster.schedulingPolicy = cluster.SCHED_NONE;
  // Records and session lookups cross as structured clones, not JSON text.
  cluster.setupPrimary({ serialization: "advanced" });
  for (let i = 0; i < options.workers; i++) fork();
}

/**
 * A worker's view of the sessions and captures, all owned by the primary. Session lookups are
 * cached (a session never changes once registered); records go up without waiting for an answer,
 * those of calls that end together in one message.
 */
export class WorkerStore implements GuardStore {
  private readonly byKey = new Map<string, Session>();
  private readonly pending = new Map<
    number,
    { resolve: (value: unknown) => void; reject: (err: Error) => void }
  >();
  private nextId = 0;
  readonly inFlight = new CallsInFlight();
  /** Records not sent yet, and the promise every one of their appends returned. */
  private batch:
    | { records: Serialized[]; sent: Promise<void>; settle: (err: Error | null) => void }
    | undefined;
  private static readonly MAX_CACHED = 10_000;

  constructor() {
    process.on("message", (message: Down) => {
      if (message.t === "barrier") {
        const answer = () => {
          // Queued behind every record of a call this worker has ended so far.
          this.flush();
          process.send?.({ t: "barrier", n: message.n } satisfies Up);
        };
        const end = message.end;
        if (!end) return answer();
        // Refuse the session's next calls here, then answer once its calls under way are recorded.
        const cached = this.byKey.get(end.apiKey);
        if (cached) cached.endedAt = end.endedAt;
        void this.inFlight.idle(end.id, END_WAIT_MS).then(answer);
      } else if (message.t === "reply") {
        const waiting = this.pending.get(message.id);
        if (!waiting) return;
        this.pending.delete(message.id);
        if (message.ok) waiting.resolve(message.value);
        else waiting.reject(new Error(message.message));
      }
    });
    process.on("disconnect", () => {
      for (const waiting of this.pending.values())
        waiting.reject(new Error("the guard's primary process is gone"));
      this.pending.clear();
    });
  }

  private call<T>(op: Op, ...args: unknown[]): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const id = ++this.nextId;
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.send({ t: "call", id, op, args }, (err) => {
        if (!err) return;
        this.pending.delete(id);
        reject(err);
      });
    });
  }

  private send(message: Up, done: (err: Error | null) => void): void {
    if (!process.connected || !process.send) done(new Error("the guard's primary process is gone"));
    else process.send(message, undefined, {}, done);
  }

  private remember(session: Session): Session {
    if (this.byKey.size >= WorkerStore.MAX_CACHED) this.byKey.delete(this.byKey.keys().next().value!);
    this.byKey.set(session.apiKey, session);
    return session;
  }

  sessionByKey(key: string): Session | undefined {
    return this.byKey.get(key);
  }

  async lookupKey(key: string): Promise<Session | undefined> {
    const session = this.byKey.get(key) ?? (await this.call<Session | undefined>("lookupKey", key));
    return session && this.remember(session);
  }

  session(id: string): Promise<Session | undefined> {
    return this.call("session", id);
  }

  async register(input: SessionRegistration & { apiKey: string; id: string }): Promise<Session | undefined> {
    const session = await this.call<Session | undefined>("register", input);
    return session && this.remember(session);
  }

  counts(id: string): Promise<{ calls: number; blocked: number }> {
    return this.call("counts", id);
  }

  append(record: CaptureRecord): Promise<void> {
    const { json, blocked } = serializeRecord(record);
    // Sent at the end of this turn of the event loop, or sooner when a barrier comes (see flush's
    // callers): append runs before the answer ends, so a barrier never overtakes it.
    if (!this.batch) {
      let settle!: (err: Error | null) => void;
      const sent = new Promise<void>((resolve, reject) => {
        settle = (err) => (err ? reject(err) : resolve());
      });
      this.batch = { records: [], sent, settle };
      setImmediate(() => this.flush());
    }
    this.batch.records.push({ sessionId: record.sessionId, json, blocked });
    return this.batch.sent;
  }

  private flush(): void {
    const batch = this.batch;
    if (!batch) return;
    this.batch = undefined;
    this.send({ t: "append", records: batch.records }, batch.settle);
  }

  records(id: string): Promise<CaptureRecord[]> {
    return this.call("records", id);
  }

  end(id: string): Promise<Session | undefined> {
    return this.call("end", id);
  }

  writeTrajectory(id: string, trajectory: unknown): Promise<string> {
    return this.call("writeTrajectory", id, trajectory);
  }

  async close(): Promise<void> {
    // Nothing of its own to close: the primary owns the files.
  }
}
