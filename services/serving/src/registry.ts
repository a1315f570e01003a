import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { type AdapterState, type AdapterVersion, servedName } from "@bridle/contracts";
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
  created_at: string;
  updated_at: string;
}

const toVersion = (r: Row): AdapterVersion => ({
  name: r.name,
  version: r.version,
  servedName: servedName(r.name, r.version),
  path: r.path,
  hash: r.hash,
  step: r.step,
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
  }): AdapterVersion {
    const now = new Date().toISOString();
    this.db
      .prepare(
        `INSERT INTO versions (name, version, path, hash, step, state, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, 'loading', ?, ?)`,
      )
      .run(v.name, v.version, v.path, v.hash, v.step, now, now);
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
