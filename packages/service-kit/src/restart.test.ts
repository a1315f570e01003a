import { describe, expect, it } from "vitest";
import { RestartPolicy } from "./restart.ts";

describe("RestartPolicy", () => {
  it("doubles the delay while a process dies before it is up, and starts over once it is up", () => {
    const policy = new RestartPolicy({ initialMs: 500, maxMs: 4_000 });
    expect(policy.died(false, 0)).toBe(500); // died while up: the first delay, not doubled
    expect([1, 2, 3, 4, 5].map((t) => policy.died(true, t))).toEqual([500, 1_000, 2_000, 4_000, 4_000]);
    policy.up();
    expect(policy.died(true, 6)).toBe(500);
  });

  it("restarts at once when asked to, and gives up past its deaths a minute", () => {
    const policy = new RestartPolicy({ initialMs: 0, maxMs: 0, maxPerMinute: 3 });
    expect([0, 10, 20].map((t) => policy.died(false, t))).toEqual([0, 0, 0]);
    expect(policy.died(false, 30)).toBeNull();
    // A minute later the old deaths no longer count.
    expect(policy.died(false, 70_000)).toBe(0);
    expect(policy.recentDeaths).toBe(1);
  });
});
