import { describe, expect, it } from "vitest";
import { meanInterval, sd, tQuantile975, wilson } from "./stats.ts";

describe("statistics", () => {
  it("gives Student's t quantiles from the table and the expansion", () => {
    expect(tQuantile975(1)).toBeCloseTo(12.706, 3);
    expect(tQuantile975(10)).toBeCloseTo(2.228, 3);
    expect(tQuantile975(60)).toBeCloseTo(2.0003, 3);
    expect(tQuantile975(1000)).toBeCloseTo(1.9623, 3);
  });

  it("computes a t-interval for a mean", () => {
    const xs = [1, 0, 1, 1, 0, 1, 1, 1];
    const ci = meanInterval(xs);
    expect(ci.estimate).toBeCloseTo(0.75, 10);
    const half = (2.365 * sd(xs)) / Math.sqrt(8);
    expect(ci.low).toBeCloseTo(0.75 - half, 6);
    expect(ci.high).toBeCloseTo(0.75 + half, 6);
  });

  it("cuts an interval back to where the quantity can lie (two tasks: t = 12.7)", () => {
    const ci = meanInterval([2 / 6, -1 / 6], [-1, 1]); // the repair tasks of a real report
    expect(ci.estimate).toBeCloseTo(1 / 12, 10);
    expect(ci.low).toBe(-1);
    expect(ci.high).toBe(1);
    expect(meanInterval([2 / 6, -1 / 6]).low).toBeLessThan(-3); // unbounded without a range
  });

  it("leaves the interval undefined for a single observation instead of inventing one", () => {
    const ci = meanInterval([0.5]);
    expect(ci.estimate).toBe(0.5);
    expect(ci.low).toBeNaN();
  });

  it("gives Wilson intervals that stay inside [0, 1]", () => {
    const none = wilson(0, 10);
    expect(none.estimate).toBe(0);
    expect(none.low).toBe(0);
    expect(none.high).toBeCloseTo(0.2775, 3);
    const half = wilson(5, 10);
    expect(half.low).toBeCloseTo(0.2366, 3);
    expect(half.high).toBeCloseTo(0.7634, 3);
  });
});
