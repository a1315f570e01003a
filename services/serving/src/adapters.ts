import { randomUUID } from "node:crypto";
import { existsSync, rmSync } from "node:fs";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  AdapterName,
  type AdapterRef,
  type AdapterSource,
  type AdapterVersion,
  type AdapterView,
  type DecisionRequest,
  type LineageDecision,
  type LineageKey,
  type LineageView,
  type LoadAdapterRequest,
  lineageOf,
  type ModelNodes,
  servedName,
  versionOf,
} from "@bridle/contracts";
import { httpError, type Logger, ServiceError } from "@bridle/service-kit";
import { InvalidAdapterError, inspectAdapter } from "./adapter-files.ts";
import { Canary } from "./canary.ts";
import type { ModelPool } from "./pool.ts";
import type { AdapterRegistry } from "./registry.ts";

export interface AdapterSettings {
  maxLoras: number;
  maxLoraRank: number;
  keepVersions: number;
  monitorMs: number;
  /** How often every serving version is proven again on the model server (0: never). */
  liveCanaryMs?: number;
  /** Where adapters loaded by reference are kept, one folder per content hash. */
  filesDir: string;
}

/** The files of a PEFT adapter, as its owner serves them under the source URL. */
const ADAPTER_FILES = ["adapter_config.json", "adapter_model.safetensors"] as const;
/** How long fetching one adapter file may take. */
const FETCH_TIMEOUT_MS = 300_000;

type Health = "starting" | "up" | "down" | "reloading";
const message = (err: unknown) => (err instanceof Error ? err.message : String(err));
const retryable = (err: unknown) => !(err instanceof ServiceError) || err.retryable;

/**
 * Loads, proves, routes and retires adapter versions on the model servers (one node or a pool).
 * Every change to what vLLM has loaded goes through one queue, so loads, retirements and reloads
 * never interleave. A monitor notices when a node lost its adapters (it restarted, or it was away)
 * and loads the serving versions again; meanwhile requests for adapters get retryable 503s, never
 * the base model.
 */
export class AdapterManager {
  private queue: Promise<unknown> = Promise.resolve();
  /** Loads under way or queued, by served name: each ends as the version's final record. */
  private readonly loads = new Map<string, Promise<AdapterVersion>>();
  /** Loading versions whose load was cancelled (retired before they served). */
  private readonly cancelled = new Set<string>();
  private health: Health = "starting";
  private timer: NodeJS.Timeout | undefined;
  private canaryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly registry: AdapterRegistry,
    readonly pool: ModelPool,
    private readonly settings: AdapterSettings,
    private readonly log: Logger,
  ) {
    for (const v of registry.inState("loading")) {
      registry.setState(v.name, v.version, "failed", {
        error: { code: "load_interrupted", message: "the service stopped while loading this version" },
      });
    }
  }

  /** Starts the monitor; its first check runs at once. */
  start(): void {
    void this.check();
    this.timer = setInterval(() => void this.check(), this.settings.monitorMs);
    this.timer.unref();
    if (this.settings.liveCanaryMs) {
      this.canaryTimer = setInterval(() => void this.liveCanary(), this.settings.liveCanaryMs);
      this.canaryTimer.unref();
    }
  }

  stop(): void {
    clearInterval(this.timer);
    clearInterval(this.canaryTimer);
  }

  /**
   * The live canary: every serving version proven again, as at its load, on the model server that
   * answers the harnesses. A version whose outputs now equal the base model's (its weights swapped
   * or dropped behind its name: a stale cache, a restart that reloaded the wrong files) is flagged,
   * failed with `served_as_base`, and unloaded, so nothing samples it or trains on it as if it were
   * the adapter. A model server that cannot answer is left to the monitor. Returns what it flagged.
   */
  liveCanary(): Promise<AdapterVersion[]> {
    return this.exclusive(async () => {
      const flagged: AdapterVersion[] = [];
      for (const v of this.registry.inState("serving")) {
        let delta: number;
        try {
          delta = await this.pool.deltaFromBase(v.servedName, true);
        } catch {
          return flagged;
        }
        if (delta >= Canary.minDelta) continue;
        this.log.error({ servedName: v.servedName, delta }, "an adapter version is served as the base model");
        await this.unload(v.servedName).catch(() => undefined);
        flagged.push(
          this.registry.setState(v.name, v.version, "failed", {
            error: {
              code: "served_as_base",
              message: `the live canary found outputs equal to the base model's (max |delta logprob| ${delta}): the adapter's weights are not what serves under its name`,
            },
            canaryDelta: delta,
          }),
        );
      }
      return flagged;
    });
  }

  view(name: string): AdapterView | undefined {
    const versions = this.registry.versions(name);
    if (versions.length === 0) return undefined;
    return { name, current: this.registry.current(name)?.version ?? null, versions };
  }

  list(): AdapterView[] {
    return this.registry.names().map((n) => this.view(n)!);
  }

  /** One (model, harness): its promoted version, the decisions that made it so, its adapters. */
  lineage(key: LineageKey, adapters: AdapterView[] = this.list()): LineageView {
    const promoted = this.registry.promoted(key);
    return {
      ...key,
      promoted: promoted ? (this.registry.get(promoted.name, promoted.version) ?? null) : null,
      decisions: this.registry.decisions(key),
      adapters: adapters.filter((a) => {
        const of = lineageOf(a.name);
        return of?.model === key.model && of.harness === key.harness;
      }),
    };
  }

  /** Every lineage, the adapters read once for all of them. */
  lineages(): LineageView[] {
    const adapters = this.list();
    return this.registry.lineages().map((key) => this.lineage(key, adapters));
  }

  /**
   * Changes a lineage's promoted version, once per decision id (a retried workflow gets the same
   * answer). Promote: a serving version of this lineage. Rollback: the promoted version found
   * wanting; the lineage returns to what was promoted before it (the nearest still serving), or to
   * the base model alone.
   */
  decide(key: LineageKey, request: DecisionRequest): LineageDecision {
    const earlier = this.registry.decision(request.id);
    if (earlier) return earlier;
    const { adapter } = request;
    const of = lineageOf(adapter.name);
    if (of?.model !== key.model || of.harness !== key.harness)
      throw httpError(
        400,
        "wrong_lineage",
        `${adapter.name} is not an adapter of ${key.model} in ${key.harness}`,
      );
    const target = this.registry.get(adapter.name, adapter.version);
    const name = servedName(adapter.name, adapter.version);
    if (!target) throw httpError(404, "adapter_not_found", `no version ${name}`);
    const promoted = this.registry.promoted(key);
    const same = (a: AdapterRef | null, b: AdapterRef | null) =>
      a !== null && b !== null && a.name === b.name && a.version === b.version;
    const base = { id: request.id, reason: request.reason, evalId: request.evalId, previous: promoted };
    if (request.action === "promote") {
      if (target.state !== "serving")
        throw httpError(
          409,
          "adapter_not_serving",
          `${name} is ${target.state}: only a serving version is promoted`,
        );
      if (same(promoted, adapter))
        throw httpError(409, "already_promoted", `${name} is already the promoted version`);
      const decision = this.registry.record(key, { ...base, action: "promote", adapter });
      this.log.info({ lineage: key, adapter: name, previous: promoted }, "adapter version promoted");
      return decision;
    }
    if (!same(promoted, adapter))
      throw httpError(
        409,
        "not_promoted",
        `${name} is not the promoted version of ${key.model} in ${key.harness} (${promoted ? servedName(promoted.name, promoted.version) : "the base model"} is)`,
      );
    const decision = this.registry.record(key, {
      ...base,
      action: "rollback",
      adapter: this.rollbackTarget(key, adapter),
    });
    this.log.warn({ lineage: key, adapter: name, to: decision.adapter }, "adapter version rolled back");
    return decision;
  }

  /** What was promoted before `from`: the nearest earlier promoted version still serving, else none. */
  private rollbackTarget(key: LineageKey, from: AdapterRef): AdapterRef | null {
    const decisions = this.registry.decisions(key);
    const promotedBefore = (v: AdapterRef): AdapterRef | null =>
      decisions.findLast(
        (d) => d.action === "promote" && d.adapter?.name === v.name && d.adapter.version === v.version,
      )?.previous ?? null;
    const seen = new Set<string>();
    for (let v = promotedBefore(from); v !== null; v = promotedBefore(v)) {
      const id = servedName(v.name, v.version);
      if (seen.has(id)) break;
      seen.add(id);
      if (this.registry.get(v.name, v.version)?.state === "serving") return v;
    }
    return null;
  }

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(work, work);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private requireUp(): void {
    if (this.health === "up") return;
    const what = this.health === "down" ? "is unreachable" : "is (re)loading adapters";
    throw httpError(
      503,
      this.health === "down" ? "model_server_unavailable" : "adapter_reloading",
      `the model server ${what}; retry shortly`,
      {
        retryable: true,
      },
    );
  }

  /**
   * Accepts a new version and queues its load: the answer comes at once, with the version
   * `loading`; `settled` (or the version's record) says how it ended: serving once vLLM has it and
   * the canary proved it, failed otherwise, the earlier versions serving meanwhile. What can be
   * refused at once is: an invalid adapter (422), a version number taken by other content (409);
   * the model server down fails the load (a retryable failure). The same content submitted again is the same version: a version
   * serving or loading is answered as it is, a failed one is loaded again (a retried load).
   */
  submit(name: string, request: LoadAdapterRequest): AdapterVersion {
    const { source } = request;
    let hash: string;
    let path: string;
    if (source) {
      // Fetched when its turn comes, into a folder named by the hash the files must have.
      hash = source.hash;
      path = join(this.settings.filesDir, hash);
    } else {
      path = request.path!;
      try {
        hash = inspectAdapter(path, this.settings.maxLoraRank).hash;
      } catch (err) {
        if (err instanceof InvalidAdapterError) throw httpError(422, "invalid_adapter", err.message);
        throw err;
      }
    }
    const existing = request.version === undefined ? undefined : this.registry.get(name, request.version);
    if (existing?.hash === hash && (existing.state === "serving" || existing.state === "loading"))
      return existing;
    if (request.version !== undefined && !(existing?.hash === hash && existing.state === "failed")) {
      const next = this.registry.nextVersion(name);
      if (existing || request.version < next) {
        throw httpError(
          409,
          "version_exists",
          `${servedName(name, request.version)} exists (${existing?.state ?? "an earlier number"}); versions only go up, next is ${next}`,
        );
      }
    }
    // The number is taken now, so two loads submitted together never get the same one.
    const record = existing
      ? this.registry.setState(name, existing.version, "loading", { error: null })
      : this.registry.insert({
          name,
          version: request.version ?? this.registry.nextVersion(name),
          path,
          hash,
          step: request.step ?? null,
          parent: request.parent ?? null,
        });
    const load = this.exclusive(() => this.finishLoad(record, source));
    this.loads.set(record.servedName, load);
    void load.finally(() => this.loads.delete(record.servedName));
    return record;
  }

  /** The version once its load has ended (at once when it is not loading), or after `timeoutMs`. */
  async settled(name: string, version: number, timeoutMs: number): Promise<AdapterVersion | undefined> {
    const v = this.registry.get(name, version);
    const load = v && this.loads.get(v.servedName);
    if (!load) return v;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<AdapterVersion>((resolve) => {
      timer = setTimeout(() => resolve(this.registry.get(name, version)!), timeoutMs);
    });
    try {
      return await Promise.race([load, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** A queued load's work: room, load, canary, retention; a cancelled load stops where it is. */
  private async finishLoad(record: AdapterVersion, source?: AdapterSource): Promise<AdapterVersion> {
    const log = this.log.child({ adapter: record.servedName });
    const cancelled = () => {
      if (!this.cancelled.delete(record.servedName)) return undefined;
      log.info({}, "adapter load cancelled");
      return this.markRetired(record, { code: "load_cancelled", message: "cancelled before it served" });
    };
    const early = cancelled();
    if (early) return early;
    if (source) {
      const failure = await this.fetchFiles(record.path, source);
      if (failure) {
        log.warn({ error: failure, source: source.url }, "adapter files not fetched");
        return this.registry.setState(record.name, record.version, "failed", { error: failure });
      }
    }
    try {
      this.requireUp();
      await this.freeSlot();
    } catch (err) {
      return this.registry.setState(record.name, record.version, "failed", {
        error: { code: "model_server_unavailable", message: message(err) },
      });
    }
    const proven = await this.loadAndProve(record);
    if (proven.state !== "serving") {
      this.cancelled.delete(record.servedName);
      log.warn({ error: proven.error }, "adapter version failed; earlier versions keep serving");
      return proven;
    }
    if (this.cancelled.has(record.servedName)) {
      await this.unload(record.servedName).catch(() => undefined);
      return cancelled()!;
    }
    log.info({ hash: proven.hash, canaryDelta: proven.canaryDelta }, "adapter version serving");
    await this.applyRetention(record.name);
    return this.registry.get(record.name, record.version)!;
  }

  /**
   * Fetches an adapter's files from its source into `dir` unless they are there already, and checks
   * them: a servable adapter whose content hash is the source's. Returns why not, or undefined.
   */
  private async fetchFiles(
    dir: string,
    source: AdapterSource,
  ): Promise<{ code: string; message: string } | undefined> {
    const check = (at: string) => {
      try {
        const { hash } = inspectAdapter(at, this.settings.maxLoraRank);
        return hash === source.hash
          ? undefined
          : {
              code: "content_mismatch",
              message: `the files at ${source.url} hash to ${hash}, not ${source.hash}`,
            };
      } catch (err) {
        if (err instanceof InvalidAdapterError) return { code: "invalid_adapter", message: err.message };
        throw err;
      }
    };
    if (existsSync(dir) && !check(dir)) return undefined;
    const part = `${dir}.part-${randomUUID().slice(0, 8)}`;
    try {
      await mkdir(part, { recursive: true });
      for (const file of ADAPTER_FILES) {
        const res = await fetch(`${source.url}/${file}`, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
        if (!res.ok) throw new Error(`${source.url}/${file} answered ${res.status}`);
        await writeFile(join(part, file), Buffer.from(await res.arrayBuffer()));
      }
    } catch (err) {
      await rm(part, { recursive: true, force: true });
      return { code: "source_unavailable", message: `cannot fetch the adapter: ${message(err)}` };
    }
    const wrong = check(part);
    if (wrong) {
      await rm(part, { recursive: true, force: true });
      return wrong;
    }
    await rm(dir, { recursive: true, force: true });
    await rename(part, dir);
    return undefined;
  }

  /** Loads a version into vLLM and runs the canary; records the outcome (serving or failed). */
  private async loadAndProve(v: AdapterVersion): Promise<AdapterVersion> {
    const fail = (code: string, text: string) =>
      this.registry.setState(v.name, v.version, "failed", { error: { code, message: text } });
    try {
      await this.pool.load(v.servedName, v.path, v.hash);
    } catch (err) {
      return fail(
        retryable(err) ? "model_server_unavailable" : "load_rejected",
        `vLLM refused the adapter: ${message(err)}`,
      );
    }
    try {
      const delta = await this.pool.deltaFromBase(v.servedName);
      if (delta < Canary.minDelta) {
        await this.unload(v.servedName);
        return fail(
          "canary_equals_base",
          `outputs equal the base model's on the canary prompt (max |delta logprob| ${delta}); the adapter is not applied`,
        );
      }
      return this.registry.setState(v.name, v.version, "serving", { error: null, canaryDelta: delta });
    } catch (err) {
      await this.unload(v.servedName).catch(() => undefined);
      return fail("model_server_unavailable", `canary failed: ${message(err)}`);
    }
  }

  /**
   * Retires a version: unloads it from vLLM and marks it retired. Idempotent. A version still
   * loading is cancelled: its load stops before vLLM gets it, or it is unloaded once loaded.
   */
  retire(name: string, version: number): Promise<AdapterVersion> {
    const loading = this.registry.get(name, version);
    if (loading?.state === "loading") this.cancelled.add(loading.servedName);
    return this.exclusive(async () => {
      const v = this.registry.get(name, version);
      if (!v) throw httpError(404, "adapter_not_found", `no version ${version} of ${name}`);
      if (v.state !== "serving") return v;
      await this.unload(v.servedName);
      this.log.info({ adapter: v.servedName }, "adapter version retired");
      return this.markRetired(v);
    });
  }

  /**
   * Marks a version retired (it never serves again). A copy fetched by reference that no serving or
   * loading version still uses is deleted: the trainer keeps the original.
   */
  private markRetired(v: AdapterVersion, error?: { code: string; message: string }): AdapterVersion {
    const retired = this.registry.setState(v.name, v.version, "retired", error ? { error } : {});
    const inUse = [...this.registry.inState("serving"), ...this.registry.inState("loading")].some(
      (other) => other.path === v.path,
    );
    if (!inUse && v.path.startsWith(`${this.settings.filesDir}/`))
      rmSync(v.path, { recursive: true, force: true });
    return retired;
  }

  private async unload(served: string): Promise<void> {
    try {
      await this.pool.unload(served);
    } catch (err) {
      if (!(err instanceof ServiceError && err.status === 404)) throw err;
    }
  }

  /**
   * Keeps vLLM's working set near --max-loras by retiring the oldest versions that are not an
   * adapter's current. Current versions are never retired for room: --max-loras bounds the
   * adapters in one batch, not the adapters registered, and vLLM swaps a registered adapter back
   * in from its (immutable) folder when a request needs it. So every finished run's adapter stays
   * servable, however many runs there were.
   */
  private async freeSlot(): Promise<void> {
    let serving = this.registry.inState("serving");
    while (serving.length >= this.settings.maxLoras) {
      const victim = serving.find(
        (v) =>
          this.registry.current(v.name)?.version !== v.version &&
          !this.registry.everPromoted(v.name, v.version),
      );
      if (!victim) {
        this.log.info(
          { serving: serving.length, maxLoras: this.settings.maxLoras },
          "more current adapters than --max-loras: vLLM swaps them in as requests need them",
        );
        return;
      }
      await this.unload(victim.servedName);
      this.markRetired(victim);
      this.log.info({ adapter: victim.servedName }, "retired to free an adapter slot");
      serving = this.registry.inState("serving");
    }
  }

  private async applyRetention(name: string): Promise<void> {
    // A version ever promoted stays: a rollback may return to it.
    const serving = this.registry
      .versions(name)
      .filter((v) => v.state === "serving" && !this.registry.everPromoted(v.name, v.version));
    for (const v of serving.slice(0, Math.max(0, serving.length - this.settings.keepVersions))) {
      await this.unload(v.servedName);
      this.markRetired(v);
      this.log.info({ adapter: v.servedName }, "retired by retention");
    }
  }

  /**
   * The folder of a version with this content hash that a node may load (serving or loading): what
   * `GET /v1/adapter-files/{hash}/{file}` serves the nodes. Undefined for any other hash.
   */
  filesOf(hash: string): string | undefined {
    return [...this.registry.inState("loading"), ...this.registry.inState("serving")].find(
      (v) => v.hash === hash,
    )?.path;
  }

  /** The pool of model servers, each with what it serves of the versions serving now. */
  nodes(): ModelNodes {
    return this.pool.view(new Set(this.registry.inState("serving").map((v) => v.servedName)));
  }

  /** Which version a request's `model` names: undefined for a non-adapter (the base model). */
  resolve(model: string): AdapterVersion | undefined {
    const at = versionOf(model);
    const name = at ? at.name : model;
    if (!AdapterName.safeParse(name).success) return undefined;
    const v = at ? this.registry.get(name, at.version) : this.registry.current(name);
    if (!v) {
      const known = this.registry.versions(name).length > 0;
      throw httpError(
        404,
        "adapter_not_found",
        known ? `${model} is not serving` : `no adapter named ${name}`,
      );
    }
    if (v.state !== "serving") throw httpError(409, "adapter_not_serving", `${model} is ${v.state}`);
    this.requireUp();
    return v;
  }

  /** Called when vLLM says it does not know a version we serve: it restarted. Check now. */
  suspectLoss(): void {
    this.health = this.health === "up" ? "reloading" : this.health;
    void this.check();
  }

  /**
   * One monitor pass: is a model server up, does every node that is up have every serving version
   * loaded, and nothing else (a version retired while its node was away)?
   */
  check(): Promise<void> {
    return this.exclusive(async () => {
      let loaded: Set<string>;
      try {
        loaded = new Set((await this.pool.survey()).adapters.map((a) => a.id));
      } catch (err) {
        if (this.health !== "down") this.log.warn({ err: message(err) }, "model server unreachable");
        this.health = "down";
        this.pool.forgetBase();
        return;
      }
      // Looked up by key for the few names a node holds, not by scanning every retired version.
      const stale = (served: string) => {
        const at = versionOf(served);
        const state = at && this.registry.get(at.name, at.version)?.state;
        return state === "retired" || state === "failed";
      };
      const gone = await this.pool.unloadStale(stale).catch((err) => [`not all: ${message(err)}`]);
      if (gone.length > 0) this.log.info({ gone }, "unloaded versions that no longer serve");
      const missing = this.registry.inState("serving").filter((v) => !loaded.has(v.servedName));
      if (missing.length === 0) {
        if (this.health !== "up") this.log.info({}, "model server up, adapters in place");
        this.health = "up";
        return;
      }
      this.health = "reloading";
      this.pool.forgetBase();
      this.log.warn({ missing: missing.map((v) => v.servedName) }, "model server lost adapters; reloading");
      for (const v of missing) {
        const outcome = await this.reloadOne(v);
        if (outcome.error?.code === "model_server_unavailable") {
          this.registry.setState(v.name, v.version, "serving", { error: null });
          return; // vLLM went away again; the next pass retries
        }
      }
      this.health = "up";
    });
  }

  private async reloadOne(v: AdapterVersion): Promise<AdapterVersion> {
    try {
      if (inspectAdapter(v.path, this.settings.maxLoraRank).hash !== v.hash) {
        return this.registry.setState(v.name, v.version, "failed", {
          error: {
            code: "content_changed",
            message: `${v.path} no longer holds the content that was proven`,
          },
        });
      }
    } catch (err) {
      return this.registry.setState(v.name, v.version, "failed", {
        error: { code: "invalid_adapter", message: message(err) },
      });
    }
    return this.loadAndProve(v);
  }
}
