import { mkdirSync } from "node:fs";
import { join } from "node:path";
import {
  type AgentTask,
  type Calibration,
  ControlResults,
  type EvaluationLabels,
  type McpServer,
  type TaskCategory,
  type TaskFile,
  type TaskImageRef,
  type TaskListQuery,
  type TaskServiceRef,
  type TaskSplit,
  type TaskSummary,
  type VerifierBundle,
} from "@bridle/contracts";
import { type HarborTask, mcpServersOf, phaseEnv, type TaskToml, type TreeFile } from "@bridle/harbor";
import Database from "better-sqlite3";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS tasks (
  id TEXT PRIMARY KEY,
  hash TEXT NOT NULL,
  category TEXT NOT NULL,
  split TEXT NOT NULL,
  split_source TEXT NOT NULL,
  labels TEXT,
  controls TEXT,
  instruction TEXT NOT NULL,
  agent_timeout_sec REAL NOT NULL,
  verifier_timeout_sec REAL NOT NULL,
  verifier_env TEXT NOT NULL,
  requires TEXT NOT NULL,
  imported_at TEXT NOT NULL,
  guard TEXT NOT NULL DEFAULT '{}',
  tier TEXT,
  impossible INTEGER NOT NULL DEFAULT 0,
  reward_key TEXT,
  workdir TEXT NOT NULL DEFAULT '/app',
  image TEXT,
  agent_env TEXT NOT NULL DEFAULT '{}',
  users TEXT NOT NULL DEFAULT '{}',
  services TEXT NOT NULL DEFAULT '[]',
  mcp_servers TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE IF NOT EXISTS task_files (
  task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
  part TEXT NOT NULL CHECK (part IN ('environment', 'tests', 'solution')),
  path TEXT NOT NULL,
  mode INTEGER NOT NULL,
  content BLOB NOT NULL,
  PRIMARY KEY (task_id, part, path)
);
-- A multi-step task's per-step files: its tests (shared ones with the step's over them), its
-- workdir files and its solution.
CREATE TABLE IF NOT EXISTS step_files (
  task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
  step TEXT NOT NULL,
  part TEXT NOT NULL CHECK (part IN ('tests', 'workdir', 'solution')),
  path TEXT NOT NULL,
  mode INTEGER NOT NULL,
  content BLOB NOT NULL,
  PRIMARY KEY (task_id, step, part, path)
);
-- Kept across re-imports: a record counts while its task hash matches the task's content.
CREATE TABLE IF NOT EXISTS calibrations (
  task_id TEXT NOT NULL,
  model TEXT NOT NULL,
  harness TEXT NOT NULL,
  record TEXT NOT NULL,
  PRIMARY KEY (task_id, model, harness)
);`;

interface Row {
  id: string;
  hash: string;
  category: TaskCategory;
  split: TaskSplit;
  split_source: "hash" | "metadata";
  labels: string | null;
  controls: string | null;
  instruction: string;
  agent_timeout_sec: number;
  verifier_timeout_sec: number;
  verifier_env: string;
  agent_env: string;
  requires: string;
  imported_at: string;
  guard: string;
  tier: string | null;
  impossible: number;
  reward_key: string | null;
  workdir: string;
  image: string | null;
  /** A multi-step task's steps (StoredStep[] as JSON), or null. */
  steps: string | null;
  step_rewards: string;
  users: string;
  /** The services beside the task's container (TaskServiceRef[] as JSON). */
  services: string;
  /** The MCP servers the harness is told about (McpServer[] as JSON). */
  mcp_servers: string;
}

/** What the registry keeps of a step besides its files. */
interface StoredStep {
  name: string;
  instruction: string;
  agentTimeoutSec: number;
  verifierTimeoutSec: number;
  verifierEnv: Record<string, string>;
  minReward: Record<string, number> | null;
}

/** Who the agent and the tests run as (task.toml's `user` keys); none kept reads as root. */
const usersOf = (row: Row): { agent?: string | number; verifier?: string | number } =>
  JSON.parse(row.users) as { agent?: string | number; verifier?: string | number };

const imageOf = (row: Row): TaskImageRef => (row.image ? (JSON.parse(row.image) as TaskImageRef) : null);
const servicesOf = (row: Row): TaskServiceRef[] => JSON.parse(row.services) as TaskServiceRef[];

/** The stored `[guard]` table in the runner's shape (a registry from before the column reads as none). */
function guardOf(text: string): AgentTask["guard"] {
  const { allowed_hosts = [], ...plugins } = JSON.parse(text) as Partial<TaskToml["guard"]>;
  return {
    allowedHosts: allowed_hosts,
    plugins: { answer_paths: [], protected_paths: [], rules: [], ...plugins },
  };
}

const toSummary = (row: Row, calibrations: Calibration[] = []): TaskSummary => ({
  id: row.id,
  hash: row.hash,
  category: row.category,
  split: row.split,
  splitSource: row.split_source,
  tier: row.tier ?? null,
  impossible: row.impossible === 1,
  labels: row.labels ? (JSON.parse(row.labels) as EvaluationLabels) : null,
  // Parsed through the schema: rows written before repeats existed read as one run of each control.
  controls: row.controls ? ControlResults.parse(JSON.parse(row.controls)) : null,
  calibrations: calibrations.filter((c) => c.taskHash === row.hash),
  agentTimeoutSec: row.agent_timeout_sec,
  verifierTimeoutSec: row.verifier_timeout_sec,
  requires: JSON.parse(row.requires) as string[],
  importedAt: row.imported_at,
});

/** The task registry: one SQLite file holding every task's metadata and files, so it survives restarts. */
export class TaskStore {
  private readonly db: Database.Database;

  constructor(dataDir: string) {
    mkdirSync(dataDir, { recursive: true });
    this.db = new Database(join(dataDir, "tasks.sqlite"));
    this.db.pragma("journal_mode = WAL");
    this.db.pragma("foreign_keys = ON");
    this.db.exec(SCHEMA);
    // Registries written before tasks carried guard rules, tiers or hack checks gain the columns
    // (read as none).
    const columns = this.db.prepare("PRAGMA table_info(tasks)").all() as { name: string }[];
    if (!columns.some((c) => c.name === "guard")) {
      this.db.exec("ALTER TABLE tasks ADD COLUMN guard TEXT NOT NULL DEFAULT '{}'");
    }
    if (!columns.some((c) => c.name === "tier")) this.db.exec("ALTER TABLE tasks ADD COLUMN tier TEXT");
    if (!columns.some((c) => c.name === "impossible")) {
      this.db.exec("ALTER TABLE tasks ADD COLUMN impossible INTEGER NOT NULL DEFAULT 0");
    }
    if (!columns.some((c) => c.name === "reward_key"))
      this.db.exec("ALTER TABLE tasks ADD COLUMN reward_key TEXT");
    if (!columns.some((c) => c.name === "workdir"))
      this.db.exec("ALTER TABLE tasks ADD COLUMN workdir TEXT NOT NULL DEFAULT '/app'");
    if (!columns.some((c) => c.name === "image")) this.db.exec("ALTER TABLE tasks ADD COLUMN image TEXT");
    if (!columns.some((c) => c.name === "steps")) this.db.exec("ALTER TABLE tasks ADD COLUMN steps TEXT");
    if (!columns.some((c) => c.name === "step_rewards"))
      this.db.exec("ALTER TABLE tasks ADD COLUMN step_rewards TEXT NOT NULL DEFAULT 'mean'");
    if (!columns.some((c) => c.name === "agent_env"))
      this.db.exec("ALTER TABLE tasks ADD COLUMN agent_env TEXT NOT NULL DEFAULT '{}'");
    if (!columns.some((c) => c.name === "users"))
      this.db.exec("ALTER TABLE tasks ADD COLUMN users TEXT NOT NULL DEFAULT '{}'");
    if (!columns.some((c) => c.name === "services"))
      this.db.exec("ALTER TABLE tasks ADD COLUMN services TEXT NOT NULL DEFAULT '[]'");
    if (!columns.some((c) => c.name === "mcp_servers"))
      this.db.exec("ALTER TABLE tasks ADD COLUMN mcp_servers TEXT NOT NULL DEFAULT '[]'");
  }

  /**
   * Adds or replaces a task. Controls given here are stored; without them, earlier controls are
   * kept only if they were run on the same content hash.
   */
  upsert(
    task: HarborTask,
    split: { split: TaskSplit; source: "hash" | "metadata" },
    controls: ControlResults | null,
    /** The image built from the task's Dockerfile, when one was. */
    image: TaskImageRef = null,
    /** The services beside the task's container, with their built images. */
    services: readonly TaskServiceRef[] = [],
  ): void {
    const previous = this.get(task.id);
    const kept = controls ?? (previous?.controls?.hash === task.hash ? previous.controls : null);
    const env = phaseEnv(task.toml);
    const write = this.db.transaction(() => {
      this.db.prepare("DELETE FROM tasks WHERE id = ?").run(task.id);
      this.db
        .prepare(
          `INSERT INTO tasks (id, hash, category, split, split_source, labels, controls, instruction,
             agent_timeout_sec, verifier_timeout_sec, verifier_env, requires, imported_at, guard, tier, impossible, reward_key, workdir, image, steps, step_rewards, agent_env, users, services, mcp_servers)
           VALUES (@id, @hash, @category, @split, @split_source, @labels, @controls, @instruction,
             @agent_timeout_sec, @verifier_timeout_sec, @verifier_env, @requires, @imported_at, @guard, @tier, @impossible, @reward_key, @workdir, @image, @steps, @step_rewards, @agent_env, @users, @services, @mcp_servers)`,
        )
        .run({
          id: task.id,
          hash: task.hash,
          category: task.category,
          split: split.split,
          split_source: split.source,
          labels: task.labels ? JSON.stringify(task.labels) : null,
          controls: kept ? JSON.stringify(kept) : null,
          instruction: task.instruction,
          agent_timeout_sec: task.toml.agent.timeout_sec,
          verifier_timeout_sec: task.toml.verifier.timeout_sec,
          verifier_env: JSON.stringify(env.verifier),
          agent_env: JSON.stringify(env.agent),
          requires: JSON.stringify(task.toml.environment.requires),
          imported_at: new Date().toISOString(),
          guard: JSON.stringify(task.toml.guard),
          tier: task.toml.metadata.tier ?? null,
          impossible: task.toml.metadata.impossible ? 1 : 0,
          reward_key: task.toml.verifier.reward_key ?? null,
          workdir: task.workdir,
          image: image ? JSON.stringify(image) : null,
          steps:
            task.steps.length > 0
              ? JSON.stringify(
                  task.steps.map(
                    (step): StoredStep => ({
                      name: step.name,
                      instruction: step.instruction,
                      agentTimeoutSec: step.agentTimeoutSec,
                      verifierTimeoutSec: step.verifierTimeoutSec,
                      verifierEnv: step.verifierEnv,
                      minReward: step.minReward,
                    }),
                  ),
                )
              : null,
          step_rewards: task.stepRewards,
          users: JSON.stringify({ agent: task.toml.agent.user, verifier: task.toml.verifier.user }),
          services: JSON.stringify(services),
          mcp_servers: JSON.stringify(mcpServersOf(task.toml)),
        });
      const insert = this.db.prepare(
        "INSERT INTO task_files (task_id, part, path, mode, content) VALUES (?, ?, ?, ?, ?)",
      );
      const parts: [string, TreeFile[]][] = [
        ["environment", task.environment],
        ["tests", task.tests],
        ["solution", task.solution],
      ];
      for (const [part, files] of parts)
        for (const f of files) insert.run(task.id, part, f.path, f.mode, f.content);
      const insertStep = this.db.prepare(
        "INSERT INTO step_files (task_id, step, part, path, mode, content) VALUES (?, ?, ?, ?, ?, ?)",
      );
      for (const step of task.steps) {
        const stepParts: [string, TreeFile[]][] = [
          ["tests", step.tests],
          ["workdir", step.workdir],
          ["solution", step.solution],
        ];
        for (const [part, files] of stepParts)
          for (const f of files) insertStep.run(task.id, step.name, part, f.path, f.mode, f.content);
      }
    });
    write();
  }

  private row(id: string): Row | undefined {
    return this.db.prepare("SELECT * FROM tasks WHERE id = ?").get(id) as Row | undefined;
  }

  get(id: string): TaskSummary | null {
    const row = this.row(id);
    return row ? toSummary(row, this.calibrations().get(id)) : null;
  }

  /** Records a task's measured base success for one (model, harness), replacing an earlier one. */
  calibrate(id: string, record: Calibration): void {
    this.db
      .prepare("INSERT OR REPLACE INTO calibrations (task_id, model, harness, record) VALUES (?, ?, ?, ?)")
      .run(id, record.model, record.harness, JSON.stringify(record));
  }

  private calibrations(): Map<string, Calibration[]> {
    const rows = this.db
      .prepare("SELECT task_id, record FROM calibrations ORDER BY model, harness")
      .all() as {
      task_id: string;
      record: string;
    }[];
    const byTask = new Map<string, Calibration[]>();
    for (const r of rows) byTask.set(r.task_id, [...(byTask.get(r.task_id) ?? []), JSON.parse(r.record)]);
    return byTask;
  }

  list(query: TaskListQuery = {}): TaskSummary[] {
    const rows = this.db.prepare("SELECT * FROM tasks ORDER BY id").all() as Row[];
    const calibrations = this.calibrations();
    return rows
      .map((row) => toSummary(row, calibrations.get(row.id)))
      .filter((task) => {
        if (query.category && task.category !== query.category) return false;
        if (query.split && task.split !== query.split) return false;
        if (query.tier && task.tier !== query.tier) return false;
        if (query.status && task.labels?.status !== query.status) return false;
        if (query.controls) {
          const state = task.controls === null ? "unchecked" : task.controls.passed ? "passed" : "failed";
          if (state !== query.controls) return false;
        }
        return true;
      });
  }

  private files(id: string, part: "environment" | "tests"): TaskFile[] {
    return this.fileRows(
      "SELECT path, mode, content FROM task_files WHERE task_id = ? AND part = ? ORDER BY path",
      id,
      part,
    );
  }

  /** Files as the views carry them, from a query of (path, mode, content) rows. */
  private fileRows(sql: string, ...params: string[]): TaskFile[] {
    const rows = this.db.prepare(sql).all(...params) as { path: string; mode: number; content: Buffer }[];
    return rows.map((r) => ({ path: r.path, mode: r.mode, base64: r.content.toString("base64") }));
  }

  private stepFiles(id: string, step: string, part: "tests" | "workdir"): TaskFile[] {
    return this.fileRows(
      "SELECT path, mode, content FROM step_files WHERE task_id = ? AND step = ? AND part = ? ORDER BY path",
      id,
      step,
      part,
    );
  }

  private steps(row: Row): StoredStep[] {
    return row.steps ? (JSON.parse(row.steps) as StoredStep[]) : [];
  }

  /** What an agent may see: instruction and workspace files. Never tests or solution. */
  agentTask(id: string): AgentTask | null {
    const row = this.row(id);
    if (!row) return null;
    return {
      id: row.id,
      hash: row.hash,
      category: row.category,
      instruction: row.instruction,
      agentTimeoutSec: row.agent_timeout_sec,
      workdir: row.workdir,
      image: imageOf(row),
      services: servicesOf(row),
      mcpServers: JSON.parse(row.mcp_servers) as McpServer[],
      environment: this.files(id, "environment"),
      guard: guardOf(row.guard),
      env: JSON.parse(row.agent_env) as Record<string, string>,
      steps: this.steps(row).map((step) => ({
        name: step.name,
        instruction: step.instruction,
        agentTimeoutSec: step.agentTimeoutSec,
        workdir: this.stepFiles(id, step.name, "workdir"),
        minReward: step.minReward,
      })),
      stepRewards: row.step_rewards === "final" ? "final" : "mean",
      user: usersOf(row).agent ?? null,
    };
  }

  /** What the verifier needs: the tests and their settings. */
  verifierBundle(id: string): VerifierBundle | null {
    const row = this.row(id);
    if (!row) return null;
    return {
      id: row.id,
      hash: row.hash,
      category: row.category,
      verifierTimeoutSec: row.verifier_timeout_sec,
      verifierEnv: JSON.parse(row.verifier_env) as Record<string, string>,
      rewardKey: row.reward_key ?? null,
      workdir: row.workdir,
      image: imageOf(row),
      services: servicesOf(row),
      tests: this.files(id, "tests"),
      steps: this.steps(row).map((step) => ({
        name: step.name,
        verifierTimeoutSec: step.verifierTimeoutSec,
        verifierEnv: step.verifierEnv,
        tests: this.stepFiles(id, step.name, "tests"),
      })),
      user: usersOf(row).verifier ?? null,
    };
  }

  close(): void {
    this.db.close();
  }
}
