/**
 * Sandbox benchmark: start + run + teardown of a sandbox against the same command run without one
 * (both measured here, in this run), and verifier-phase throughput at 1, 2 and 4 sandboxes at once.
 *   pnpm bench            (BENCH_N=50 BENCH_VERIFY=24 to change the sample sizes)
 */
import { spawn } from "node:child_process";
import { cp, mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { cgroupControllers, Sandbox } from "../src/index.ts";

const N = Number(process.env.BENCH_N ?? 40);
const VERIFY = Number(process.env.BENCH_VERIFY ?? 16);
const task = resolve(dirname(fileURLToPath(import.meta.url)), "../../../tasks/repair-median");

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
};
const ms = (x: number) => `${x.toFixed(1)} ms`.padStart(10);

function runPlain(argv: string[]): Promise<void> {
  return new Promise((done, fail) => {
    const child = spawn(argv[0] as string, argv.slice(1), { stdio: "ignore" });
    child.on("error", fail);
    child.on("close", () => done());
  });
}

async function timeIt(work: () => Promise<void>): Promise<number[]> {
  await work(); // warm-up
  const times: number[] = [];
  for (let i = 0; i < N; i++) {
    const start = performance.now();
    await work();
    times.push(performance.now() - start);
  }
  return times;
}

async function overhead(base: string, label: string, argv: string[]): Promise<void> {
  const plain = await timeIt(() => runPlain(argv));
  const boxed = await timeIt(async () => {
    const sandbox = await Sandbox.create({ baseDir: base, environmentDir: join(task, "environment") });
    await sandbox.run(argv, { timeoutMs: 30_000 });
    await sandbox.dispose();
  });
  const p50 = quantile(boxed, 0.5) - quantile(plain, 0.5);
  console.log(
    `${label.padEnd(22)} ${ms(quantile(plain, 0.5))} ${ms(quantile(boxed, 0.5))} ${ms(quantile(plain, 0.9))} ${ms(quantile(boxed, 0.9))} ${ms(p50)} ${(quantile(boxed, 0.5) / quantile(plain, 0.5)).toFixed(1).padStart(6)}x`,
  );
}

/** One verifier phase as the verifier runs it: fresh sandbox, tests copied in, test.sh, reward read. */
async function verifyOnce(base: string): Promise<number> {
  const sandbox = await Sandbox.create({ baseDir: base, environmentDir: join(task, "environment") });
  try {
    const tests = await sandbox.scratch("tests");
    const logs = await sandbox.scratch("logs");
    await cp(join(task, "tests"), tests, { recursive: true });
    await sandbox.run(["bash", "/tests/test.sh"], {
      timeoutMs: 60_000,
      mounts: [
        { source: tests, target: "/tests", writable: true },
        { source: logs, target: "/logs/verifier", writable: true },
      ],
    });
    return Number((await readFile(join(logs, "reward.txt"), "utf8")).trim());
  } finally {
    await sandbox.dispose();
  }
}

async function throughput(base: string, parallel: number): Promise<{ perSecond: number; p50: number }> {
  let next = 0;
  const latencies: number[] = [];
  const start = performance.now();
  const lane = async () => {
    while (next < VERIFY) {
      next++;
      const t = performance.now();
      const reward = await verifyOnce(base);
      if (reward !== 0) throw new Error(`unexpected reward ${reward} for the untouched workspace`);
      latencies.push(performance.now() - t);
    }
  };
  await Promise.all(Array.from({ length: parallel }, lane));
  return { perSecond: VERIFY / ((performance.now() - start) / 1000), p50: quantile(latencies, 0.5) };
}

async function main() {
  const base = await mkdtemp(join(tmpdir(), "bridle-bench-"));
  await mkdir(base, { recursive: true });
  try {
    console.log(
      `cgroup controllers: ${(await cgroupControllers()).join(", ") || "none"}; N=${N}, verifications=${VERIFY} per level`,
    );
    console.log(
      "\nSandbox start + run + teardown vs the same command without a sandbox (target: < 50 ms median overhead)",
    );
    console.log(
      `${"command".padEnd(22)} ${"plain p50".padStart(10)} ${"sandbox p50".padStart(10)} ${"plain p90".padStart(10)} ${"sandbox p90".padStart(10)} ${"overhead".padStart(10)}  ratio`,
    );
    await overhead(base, "true", ["true"]);
    // The same interpreter inside and out (a PATH lookup on the host may find a slower shim).
    await overhead(base, "python3 -c pass", ["/usr/bin/python3", "-c", "pass"]);

    console.log("\nVerifier phase throughput (repair-median's tests over its untouched workspace)");
    console.log(
      `${"sandboxes at once".padEnd(18)} ${"verif./s".padStart(9)} ${"latency p50".padStart(12)}  vs 1 at once`,
    );
    let single = 0;
    for (const parallel of [1, 2, 4]) {
      const r = await throughput(base, parallel);
      if (parallel === 1) single = r.perSecond;
      console.log(
        `${String(parallel).padEnd(18)} ${r.perSecond.toFixed(2).padStart(9)} ${ms(r.p50).padStart(12)}  ${(r.perSecond / single).toFixed(2)}x`,
      );
    }
  } finally {
    await rm(base, { recursive: true, force: true });
  }
}

await main();
