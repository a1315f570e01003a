import { createWriteStream, type WriteStream } from "node:fs";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { CaptureRecord, Session, type SessionRegistration } from "@bridle/contracts";
import type { Logger } from "@bridle/service-kit";
import { CallsInFlight } from "./in-flight.ts";

/**
 * What the guard's routes need of sessions and captures. `CaptureStore` holds them in this process;
 * with several guard processes (GUARD_WORKERS > 1), each worker holds a `WorkerStore` that asks the
 * primary process, the one owner of the data folder (see cluster.ts).
 */
export interface GuardStore {
  /** The session of an API key, when this process already knows it (the hot path: no waiting). */
  sessionByKey(key: string): Session | undefined;
  /** The session of an API key, asking the owner of the sessions when this process does not know it. */
  lookupKey(key: string): Promise<Session | undefined>;
  session(id: string): Promise<Session | undefined>;
  /** Registers a session; undefined when its API key is already taken. */
  register(input: SessionRegistration & { apiKey: string; id: string }): Promise<Session | undefined>;
  /** Calls recorded and tool calls blocked, counting every call whose answer has ended. */
  counts(id: string): Promise<{ calls: number; blocked: number }>;
  /** Queues one call's record; it is numbered and written in completion order. */
  append(record: CaptureRecord): Promise<void>;
  /** Every record of a call whose answer has ended, in order. */
  records(id: string): Promise<CaptureRecord[]>;
  /**
   * Ends a session (its rollout is over): later calls are refused, and this resolves once the calls
   * under way have been recorded (or `END_WAIT_MS` passed). Undefined for an unknown session.
   */
  end(id: string): Promise<Session | undefined>;
  /** The model calls under way in this process. */
  readonly inFlight: CallsInFlight;
  writeTrajectory(id: string, trajectory: unknown): Promise<string>;
  close(): Promise<void>;
}

/** How long ending a session waits for a call under way (a non-streamed answer runs to its end). */
export const END_WAIT_MS = 10_000;

/** A record as its JSONL line without `seq`, and how many of its tool calls were blocked. */
export function serializeRecord(record: CaptureRecord): { json: string; blocked: number } {
  const { seq: _seq, ...rest } = record;
  let blocked = 0;
  for (const call of record.toolCalls) if (call.decision === "block") blocked++;
  return { json: JSON.stringify(rest), blocked };
}

/**
 * Sessions and their captures on disk, under the data folder:
 * `sessions/<id>/session.json` and `sessions/<id>/calls.jsonl` (one record per model call,
 * appended when the call completes). Sessions survive a restart of the guard.
 */
export class CaptureStore implements GuardStore {
  private readonly byKey = new Map<string, Session>();
  private readonly byId = new Map<string, Session>();
  private readonly seq = new Map<string, number>();
  private readonly blocked = new Map<string, number>();
  /** Appends per session are chained so records land in completion order, never interleaved. */
  private readonly tails = new Map<string, Promise<void>>();
  /** Append streams of recently active sessions: opening a file per call costs more than the write,
   * and a stream coalesces the records of calls that end together into one write. */
  private readonly streams = new Map<string, WriteStream>();
  private static readonly MAX_OPEN = 128;
  readonly inFlight = new CallsInFlight();

  constructor(readonly dataDir: string) {}

  /** A store over `dataDir` with the sessions a previous run registered loaded, and logged. */
  static async open(
    dataDir: string,
    log: Logger,
    context: Record<string, unknown> = {},
  ): Promise<CaptureStore> {
    const store = new CaptureStore(dataDir);
    const sessions = await store.load();
    log.info({ dataDir, sessions, ...context }, "sessions loaded");
    return store;
  }

  /** Loads the sessions a previous run registered. */
  async load(): Promise<number> {
    const root = join(this.dataDir, "sessions");
    await mkdir(root, { recursive: true });
    for (const id of await readdir(root)) {
      const text = await readFile(join(root, id, "session.json"), "utf8").catch(() => undefined);
      const parsed = text ? Session.safeParse(JSON.parse(text)) : undefined;
      if (!parsed?.success) continue;
      this.remember(parsed.data);
      const records = await this.records(id);
      this.seq.set(id, records.length);
      this.blocked.set(
        id,
        records.reduce((n, r) => n + r.toolCalls.filter((c) => c.decision === "block").length, 0),
      );
    }
    return this.byId.size;
  }

  async register(input: SessionRegistration & { apiKey: string; id: string }): Promise<Session | undefined> {
    if (this.byKey.has(input.apiKey)) return undefined;
    const session: Session = { ...input, createdAt: new Date().toISOString() };
    // Taken at once, so two registrations of one key cannot both pass the check while writing.
    this.remember(session);
    this.seq.set(session.id, 0);
    const dir = join(this.dataDir, "sessions", session.id);
    try {
      await mkdir(dir, { recursive: true });
      await writeFile(join(dir, "session.json"), `${JSON.stringify(session, null, 2)}\n`);
    } catch (err) {
      this.byKey.delete(session.apiKey);
      this.byId.delete(session.id);
      this.seq.delete(session.id);
      throw err;
    }
    return session;
  }

  private remember(session: Session): void {
    this.byKey.set(session.apiKey, session);
    this.byId.set(session.id, session);
  }

  sessionByKey(key: string): Session | undefined {
    return this.byKey.get(key);
  }

  async lookupKey(key: string): Promise<Session | undefined> {
    return this.byKey.get(key);
  }

  async session(id: string): Promise<Session | undefined> {
    return this.byId.get(id);
  }

  async counts(id: string): Promise<{ calls: number; blocked: number }> {
    return { calls: this.seq.get(id) ?? 0, blocked: this.blocked.get(id) ?? 0 };
  }

  async end(id: string): Promise<Session | undefined> {
    const session = this.byId.get(id);
    if (!session) return undefined;
    if (!session.endedAt) {
      // Set first and in place (the key's entry is the same object): a call that starts from now
      // on sees it and is refused, and every call before it is under way and waited for.
      session.endedAt = new Date().toISOString();
      await writeFile(
        join(this.dataDir, "sessions", id, "session.json"),
        `${JSON.stringify(session, null, 2)}\n`,
      );
    }
    await this.inFlight.idle(id, END_WAIT_MS);
    await this.tails.get(id);
    return session;
  }

  /** Appends one call's record, numbering it in completion order. */
  append(record: CaptureRecord): Promise<void> {
    const { json, blocked } = serializeRecord(record);
    return this.appendSerialized(record.sessionId, json, blocked);
  }

  /** Appends a record already serialized (`serializeRecord`), numbering it in completion order. */
  appendSerialized(id: string, json: string, blocked: number): Promise<void> {
    const seq = this.seq.get(id) ?? 0;
    this.seq.set(id, seq + 1);
    this.blocked.set(id, (this.blocked.get(id) ?? 0) + blocked);
    const line = `{"seq":${seq},${json.slice(1)}\n`;
    const file = join(this.dataDir, "sessions", id, "calls.jsonl");
    const stream = this.stream(id, file);
    const next = new Promise<void>((resolve, reject) => {
      stream.write(line, (err) => (err ? reject(err) : resolve()));
    });
    this.tails.set(
      id,
      next.catch(() => undefined),
    );
    return next;
  }

  private stream(id: string, file: string): WriteStream {
    let stream = this.streams.get(id);
    if (stream) {
      // Refresh its place in the insertion order: the map doubles as the LRU list.
      this.streams.delete(id);
    } else {
      stream = createWriteStream(file, { flags: "a" });
      stream.on("error", () => this.streams.delete(id));
      if (this.streams.size >= CaptureStore.MAX_OPEN) {
        const [oldest, old] = this.streams.entries().next().value!;
        this.streams.delete(oldest);
        old.end();
      }
    }
    this.streams.set(id, stream);
    return stream;
  }

  /** Closes the open capture files (at shutdown). */
  async close(): Promise<void> {
    await Promise.all([...this.tails.values()]);
    await Promise.all([...this.streams.values()].map((w) => new Promise<void>((done) => w.end(done))));
    this.streams.clear();
  }

  /** A session's records; a line that does not parse is skipped rather than failing the read. */
  async records(id: string): Promise<CaptureRecord[]> {
    await this.tails.get(id);
    const text = await readFile(join(this.dataDir, "sessions", id, "calls.jsonl"), "utf8").catch(() => "");
    return text
      .split("\n")
      .filter((l) => l.length > 0)
      .flatMap((l) => {
        try {
          const parsed = CaptureRecord.safeParse(JSON.parse(l));
          return parsed.success ? [parsed.data] : [];
        } catch {
          return [];
        }
      });
  }

  async writeTrajectory(id: string, trajectory: unknown): Promise<string> {
    const file = join(this.dataDir, "sessions", id, "trajectory.json");
    await writeFile(file, `${JSON.stringify(trajectory)}\n`);
    return file;
  }
}
