import type { SampleResult, TaskCategory } from "@bridle/contracts";
import { fnv1a } from "@bridle/service-kit";

/** What the sampler needs of a task. */
export interface Sampleable {
  id: string;
  category: TaskCategory;
  hash: string;
}

/** mulberry32: a tiny seeded PRNG, so that an order is the same on every machine and run. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffle<T>(items: T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/**
 * One epoch's order: each category shuffled on its own, then interleaved in proportion to its size
 * (task i of a category of n sits at (i + jitter) / n), so every prefix, and so every batch, holds
 * each category in about its share.
 */
export function epochOrder(tasks: Sampleable[], seed: number, epoch: number): Sampleable[] {
  const byCategory = new Map<TaskCategory, Sampleable[]>();
  for (const task of [...tasks].sort((a, b) => (a.id < b.id ? -1 : 1))) {
    byCategory.set(task.category, [...(byCategory.get(task.category) ?? []), task]);
  }
  const jitter = prng(fnv1a(`${seed}:${epoch}:jitter`));
  const keyed: { key: number; task: Sampleable }[] = [];
  for (const [category, members] of [...byCategory].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const shuffled = shuffle(members, prng(fnv1a(`${seed}:${epoch}:${category}`)));
    for (const [i, task] of shuffled.entries()) keyed.push({ key: (i + jitter()) / shuffled.length, task });
  }
  return keyed.sort((a, b) => a.key - b.key).map((k) => k.task);
}

/**
 * A batch of `size` tasks starting at `cursor` in the seeded sequence of epochs. Within an epoch no
 * task repeats; the next batch starts at `nextCursor`. Deterministic in (tasks, seed, cursor).
 */
export function sampleBatch(tasks: Sampleable[], size: number, seed: number, cursor: number): SampleResult {
  const n = tasks.length;
  const orders = new Map<number, Sampleable[]>();
  const picked: SampleResult["tasks"] = [];
  for (let position = cursor; position < cursor + size; position++) {
    const epoch = Math.floor(position / n);
    if (!orders.has(epoch)) orders.set(epoch, epochOrder(tasks, seed, epoch));
    const task = orders.get(epoch)?.[position % n] as Sampleable;
    picked.push({ id: task.id, category: task.category, hash: task.hash, epoch });
  }
  return { tasks: picked, nextCursor: cursor + size, epochSize: n };
}
