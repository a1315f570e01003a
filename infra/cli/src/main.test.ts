import { fileURLToPath } from "node:url";
import { runTsx } from "@bridle/service-kit/testing";
import { describe, expect, it } from "vitest";

const main = fileURLToPath(new URL("./main.ts", import.meta.url));
const bridle = (args: string[], env: Record<string, string> = {}) => runTsx(main, args, { env });

describe("the bridle command", () => {
  it("prints its usage for --help", () => {
    const run = bridle(["--help"]);
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/Usage: bridle <command>/);
  });

  it("rejects an unknown command with the usage and exit code 2", () => {
    const run = bridle(["frobnicate"]);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/unknown command 'frobnicate'/);
  });

  it("stops on a bad setting with a message naming the variable, not a stack trace", () => {
    const run = bridle(["status"], { BRIDLE_PORT_BASE: "eighty" });
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/BRIDLE_PORT_BASE: .*\(got "eighty"\)/);
    expect(run.stderr).not.toMatch(/at .*\.ts:\d+/);
  });

  it("reports a stack that is not running, with exit code 1", () => {
    const run = bridle(["status"], {
      BRIDLE_DATA: fileURLToPath(new URL("../../../.bridle/no-such-stack", import.meta.url)),
    });
    expect(run.status).toBe(1);
    expect(run.stdout).toMatch(/the stack is not running/);
  });

  it("prints the dashboard's address with the API token in its fragment, which no server receives", () => {
    const run = bridle(["dashboard"], {
      BRIDLE_API_TOKEN: "a-dashboard-token-0123456789",
      BRIDLE_PORT_BASE: "9100",
    });
    expect(run.status).toBe(0);
    expect(run.stdout.trim()).toBe("http://127.0.0.1:9100/ui/#token=a-dashboard-token-0123456789");
  });
});
