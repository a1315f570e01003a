import { mkdirSync } from "node:fs";
import { join } from "node:path";
import {
  type AdapterRef,
  type AdapterState,
  type AdapterVersion,
  type LineageDecision,
  type LineageKey,
  lineageOf,
  servedName,
} from "@bridle/contracts";
import Database from "better-sqlite3";

interface Row {
  name: string;
  version: number;
  path: string;
  hash: string;
  step: number | null;
  state: AdapterState;
  error_code: string | null;
  error_message: string | null;
  canary_delta: number | null;
  parent_name: string | null;
  parent_version: number | null;
  created_at: string;
  updated_at: string;
}

interface DecisionRow {
  id: string;
  model: string;
  harness: string;
  action: "promote" | "rollback";
  adapter_name: string | null;
  adapter_version: number | null;
  previous_name: string | null;
  previous_version: number | null;
  reason: string;
  eval_id: string | null;
  at: string;
}

const ref = (name: string | null, version: number | null): AdapterRef | null =>
  name !== null && version !== null ? { name, version } : null;

const toDecision = (r: DecisionRow): LineageDecision => ({
  id: r.id,
  action: r.action,
  adapter: ref(r.adapter_name, r.adapter_version),
  previous: ref(r.previous_name, r.previous_version),
  reason: r.reason,
  evalId: r.eval_id,
  at: r.at,
});

const toVersion = (r: Row): AdapterVersion => ({
  name: r.name,
  version: r.version,
  servedName: servedName(r.name, r.version),
  path: r.path,
  hash: r.hash,
  step: r.step,
  parent: ref(r.parent_name, r.parent_version),
  state: r.state,
  error: r.error_code ? { code: r.error_code, message: r.error_message ?? "" } : null,
  canaryDelta: r.canary_delta,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

/** The name vLLM serves a version under. A new name per version sidesteps vLLM's in-place reload bugs. */

/**
 * Adapter versions in SQLite (WAL), so the registry survives a restart of the service. What vLLM has
 * loaded is not stored here: after a restart of either side, `serving` rows are loaded again.
 */
export class AdapterRegistry {
  private readonly db: Database.Database;

  constructor(dataDir: string) {
    mkdirSync(dataDir, { recursive: true });
    this.db = new Database(join(dataDir, "adapters.sqlite"));
    this.db.pragma("journal_mode = WAL");
    this.db.pragma("synchronous = FULL");
    this.db.exec(`CREATE TABLE IF NOT EXISTS versions (
      name TEXT NOT NULL, version INTEGER NOT NULL, path TEXT NOT NULL, hash TEXT NOT NULL,
      step INTEGER, state TEXT NOT NULL, error_code TEXT, error_message TEXT, canary_delta REAL,
      created_at TEXT NOT NULL, updated_at TEXT NOT NULL, PRIMARY KEY (name, version))`);
    // Registries from before lineages gain the parent columns (null: no parent recorded).
    const columns = new Set(
      (this.db.prepare("PRAGMA table_info(versions)").all() as { name: string }[]).map((c) => c.name),
    );
    if (!columns.has("parent_name"))
      this.db.exec(
        "ALTER TABLE versions ADD COLUMN parent_name TEXT; ALTER TABLE versions ADD COLUMN parent_version INTEGER",
      );
    // A lineage's promoted version is the adapter of its latest decision (none: the base model).
    this.db.exec(`CREATE TABLE IF NOT EXISTS decisions (
      seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, model TEXT NOT NULL,
      harness TEXT NOT NULL, action TEXT NOT NULL, adapter_name TEXT, adapter_version INTEGER,
      previous_name TEXT, previous_version INTEGER, reason TEXT NOT NULL, eval_id TEXT, at TEXT NOT NULL)`);
  }

  /** A lineage's decisions, oldest first. */
  decisions(key: LineageKey): LineageDecision[] {
    const rows = this.db
      .prepare("SELECT * FROM decisions WHERE model = ? AND harness = ? ORDER BY seq")
      .all(key.model, key.harness) as DecisionRow[];
    return rows.map(toDecision);
  }

  decision(id: string): LineageDecision | undefined {
    const row = this.db.prepare("SELECT * FROM decisions WHERE id = ?").get(id) as DecisionRow | undefined;
    return row ? toDecision(row) : undefined;
  }

  /** What a lineage has promoted now (its latest decision's adapter); null for the base model alone. */
  promoted(key: LineageKey): AdapterRef | null {
    const row = this.db
      .prepare("SELECT * FROM decisions WHERE model = ? AND harness = ? ORDER BY seq DESC LIMIT 1")
      .get(key.model, key.harness) as DecisionRow | undefined;
    return row ? toDecision(row).adapter : null;
  }

  /** Whether a version was ever promoted: a rollback may return to it, so it stays loaded. */
  everPromoted(name: string, version: number): boolean {
    return (
      this.db
        .prepare("SELECT 1 FROM decisions WHERE adapter_name = ? AND adapter_version = ? LIMIT 1")
        .get(name, version) !== undefined
    );
  }

  record(key: LineageKey, d: Omit<LineageDecision, "at">): LineageDecision {
    this.db
      .prepare(
        `INSERT INTO decisions (id, model, harness, action, adapter_name, adapter_version,
         previous_name, previous_version, reason, eval_id, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        d.id,
        key.model,
        key.harness,
        d.action,
        d.adapter?.name ?? null,
        d.adapter?.version ?? null,
        d.previous?.name ?? null,
        d.previous?.version ?? null,
        d.reason,
        d.evalId,
        new Date().toISOString(),
      );
    return this.decision(d.id)!;
  }

  /** Every (model, harness) that has an adapter or a decision. */
  lineages(): LineageKey[] {
    const keys = new Map<string, LineageKey>();
    for (const name of this.names()) {
      const key = lineageOf(name);
      if (key) keys.set(`${key.model}/${key.harness}`, key);
    }
    for (const row of this.db.prepare("SELECT DISTINCT model, harness FROM decisions").all() as LineageKey[])
      keys.set(`${row.model}/${row.harness}`, { model: row.model, harness: row.harness });
    return [...keys.values()].sort((a, b) =>
      `${a.model}/${a.harness}` < `${b.model}/${b.harness}` ? -1 : 1,
    );
  }

  get(name: string, version: number): AdapterVersion | undefined {
    const row = this.db.prepare("SELECT * FROM versions WHERE name = ? AND version = ?").get(name, version);
    return row ? toVersion(row as Row) : undefined;
  }

  versions(name: string): AdapterVersion[] {
    const rows = this.db.prepare("SELECT * FROM versions WHERE name = ? ORDER BY version").all(name);
    return (rows as Row[]).map(toVersion);
  }

  names(): string[] {
    return (
      this.db.prepare("SELECT DISTINCT name FROM versions ORDER BY name").all() as { name: string }[]
    ).map((r) => r.name);
  }

  /** Versions in a state, oldest first. */
  inState(state: AdapterState): AdapterVersion[] {
    const rows = this.db
      .prepare("SELECT * FROM versions WHERE state = ? ORDER BY updated_at, version")
      .all(state);
    return (rows as Row[]).map(toVersion);
  }

  /** The newest serving version of an adapter: what its bare name routes to. */
  current(name: string): AdapterVersion | undefined {
    const row = this.db
      .prepare("SELECT * FROM versions WHERE name = ? AND state = 'serving' ORDER BY version DESC LIMIT 1")
      .get(name);
    return row ? toVersion(row as Row) : undefined;
  }

  nextVersion(name: string): number {
    const row = this.db.prepare("SELECT MAX(version) AS v FROM versions WHERE name = ?").get(name) as {
      v: number | null;
    };
    return (row.v ?? 0) + 1;
  }

  insert(v: {
    name: string;
    version: number;
    path: string;
    hash: string;
    step: number | null;
    parent?: AdapterRef | null;
  }): AdapterVersion {
    const now = new Date().toISOString();
    this.db
      .prepare(
        `INSERT INTO versions (name, version, path, hash, step, parent_name, parent_version, state,
         created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'loading', ?, ?)`,
      )
      .run(
        v.name,
        v.version,
        v.path,
        v.hash,
        v.step,
        v.parent?.name ?? null,
        v.parent?.version ?? null,
        now,
        now,
      );
    return this.get(v.name, v.version)!;
  }

  setState(
    name: string,
    version: number,
    state: AdapterState,
    extra: { error?: { code: string; message: string } | null; canaryDelta?: number } = {},
  ): AdapterVersion {
    this.db
      .prepare(
        `UPDATE versions SET state = ?, error_code = ?, error_message = ?,
         canary_delta = COALESCE(?, canary_delta), updated_at = ? WHERE name = ? AND version = ?`,
      )
      .run(
        state,
        extra.error?.code ?? null,
        extra.error?.message ?? null,
        extra.canaryDelta ?? null,
        new Date().toISOString(),
        name,
        version,
      );
    return this.get(name, version)!;
  }

  close(): void {
    this.db.close();
  }
}
