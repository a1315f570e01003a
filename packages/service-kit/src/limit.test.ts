import { describe, expect, it } from "vitest";
import { mapBounded, Semaphore } from "./limit.ts";

const tick = () => new Promise((resolve) => setTimeout(resolve, 1));

describe("bounded concurrency", () => {
  it("never runs more than the limit, with newcomers arriving while slots are handed over", async () => {
    const limiter = new Semaphore(2);
    let running = 0;
    let peak = 0;
    const task = async () => {
      running++;
      peak = Math.max(peak, running);
      await tick();
      running--;
    };
    const first = Array.from({ length: 5 }, () => limiter.run(task));
    // Newcomers arrive while the first ones finish and hand their slots over.
    await tick();
    const later = Array.from({ length: 5 }, () => limiter.run(task));
    await Promise.all([...first, ...later]);
    expect(peak).toBe(2);
    expect(limiter.inFlight).toBe(0);
    expect(limiter.queued).toBe(0);
  });

  it("releases the slot of a task that throws", async () => {
    const limiter = new Semaphore(1);
    await expect(limiter.run(() => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    await expect(limiter.run(async () => 7)).resolves.toBe(7);
  });

  it("refuses a limit below one", () => {
    expect(() => new Semaphore(0)).toThrow("a limit of at least 1, not 0");
  });

  it("maps in order with at most `limit` in flight", async () => {
    let running = 0;
    let peak = 0;
    const out = await mapBounded([5, 1, 3, 2], 2, async (n, i) => {
      running++;
      peak = Math.max(peak, running);
      await new Promise((resolve) => setTimeout(resolve, n));
      running--;
      return `${i}:${n}`;
    });
    expect(out).toEqual(["0:5", "1:1", "2:3", "3:2"]);
    expect(peak).toBe(2);
    expect(await mapBounded([], 3, async () => 1)).toEqual([]);
  });
});
