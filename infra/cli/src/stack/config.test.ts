import { describe, expect, it } from "vitest";
import { loadStackConfig } from "./config.ts";

describe("stack settings", () => {
  it("derives every service port from the base", () => {
    const config = loadStackConfig({ BRIDLE_PORT_BASE: "9100", BRIDLE_HOME: "/srv/bridle" });
    expect(config.ports).toMatchObject({ gateway: 9100, serving: 9101, tasks: 9102, trainer: 9106 });
    expect(config.data).toBe("/srv/bridle/data");
    expect(config.embeddedVllm).toBe(true);
  });

  it("uses an external model server instead of starting one when BRIDLE_VLLM_URL is set", () => {
    const config = loadStackConfig({ BRIDLE_VLLM_URL: "http://gpu-node:8000" });
    expect(config.embeddedVllm).toBe(false);
    expect(config.vllmUrl).toBe("http://gpu-node:8000");
  });

  it("names the variable of a bad setting", () => {
    expect(() => loadStackConfig({ BRIDLE_TEMPORAL_PORT: "70000" })).toThrow(/BRIDLE_TEMPORAL_PORT/);
    expect(() => loadStackConfig({ BRIDLE_VLLM_MAX_LORA_RANK: "12" })).toThrow(
      /BRIDLE_VLLM_MAX_LORA_RANK: must be one of/,
    );
  });
});
