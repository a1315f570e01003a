import { describe, expect, it } from "vitest";
import { AdapterName, adapterHarness, adapterName, servedName } from "./serving.ts";

describe("adapter names", () => {
  it("builds a run's adapter name and its served versions, and reads the harness back", () => {
    const name = adapterName({ model: "qwen2.5-coder-0.5b", harness: "claude-code", run: "r" });
    expect(name).toBe("qwen2.5-coder-0.5b/claude-code/r");
    expect(AdapterName.safeParse(name).success).toBe(true);
    expect(servedName(name, 12)).toBe("qwen2.5-coder-0.5b/claude-code/r@v12");
    expect(adapterHarness(servedName(name, 12))).toBe("claude-code");
    expect(adapterHarness("m/pi/run-1")).toBe("pi");
    expect(adapterHarness("qwen2.5-coder-0.5b")).toBeNull();
  });
});
