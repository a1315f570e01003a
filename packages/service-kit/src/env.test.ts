import { describe, expect, it } from "vitest";
import { z } from "zod";
import { BaseEnv, EnvError, loadEnv } from "./env.ts";

const Schema = BaseEnv.extend({ UPSTREAM_URL: z.string().url() });

describe("loadEnv", () => {
  it("parses and applies defaults", () => {
    const env = loadEnv("svc", Schema, { PORT: "8080", UPSTREAM_URL: "http://127.0.0.1:1" });
    expect(env).toMatchObject({ PORT: 8080, HOST: "127.0.0.1", LOG_LEVEL: "info" });
  });

  it("names every bad variable and what it held", () => {
    let error: unknown;
    try {
      loadEnv("svc", Schema, { PORT: "eighty", UPSTREAM_URL: undefined });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(EnvError);
    const message = (error as EnvError).message;
    expect(message).toContain("svc: invalid settings");
    expect(message).toMatch(/PORT: .*\(got "eighty"\)/);
    expect(message).toMatch(/UPSTREAM_URL: .*\(not set\)/);
  });
});
