import { mkdir, readdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { StepMetrics } from "@bridle/contracts";

/**
 * Every step's figures of every run, kept beside the run's steps (one JSON file per step), so a
 * run's whole history can be drawn however long it trains: the workflow itself carries only its
 * latest steps across continue-as-new. Recording a step again replaces it (activities retry).
 */
export class RunMetrics {
  constructor(private readonly dataDir: string) {}

  private dir(run: string): string {
    return join(this.dataDir, "runs", run, "metrics");
  }

  async record(run: string, metrics: StepMetrics): Promise<void> {
    const dir = this.dir(run);
    await mkdir(dir, { recursive: true });
    const file = join(dir, `${String(metrics.step).padStart(8, "0")}.json`);
    await writeFile(`${file}.tmp`, JSON.stringify(metrics));
    await rename(`${file}.tmp`, file);
  }

  /** The run's steps in order; none for a run that recorded none. */
  async all(run: string): Promise<StepMetrics[]> {
    const names = await readdir(this.dir(run)).catch(() => [] as string[]);
    const steps = names.filter((name) => /^\d{8}\.json$/.test(name)).sort();
    return Promise.all(
      steps.map(async (name) =>
        StepMetrics.parse(JSON.parse(await readFile(join(this.dir(run), name), "utf8"))),
      ),
    );
  }
}
