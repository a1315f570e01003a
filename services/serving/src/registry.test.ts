import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { AdapterRegistry } from "./registry.ts";

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "bridle-registry-"));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe("the adapter registry", () => {
  it("numbers versions, routes the bare name to the newest serving one, and survives a reopen", () => {
    const dir = tempDir();
    const registry = new AdapterRegistry(dir);
    const name = "smollm2/pi/run-1";
    expect(registry.nextVersion(name)).toBe(1);
    registry.insert({ name, version: 1, path: "/a/1", hash: "h1", step: 1 });
    registry.setState(name, 1, "serving", { canaryDelta: 0.5 });
    registry.insert({ name, version: 2, path: "/a/2", hash: "h2", step: 2 });
    registry.setState(name, 2, "failed", { error: { code: "canary_equals_base", message: "equal" } });
    expect(registry.current(name)?.servedName).toBe("smollm2/pi/run-1@v1");
    registry.close();

    const reopened = new AdapterRegistry(dir);
    expect(reopened.nextVersion(name)).toBe(3);
    expect(reopened.versions(name).map((v) => [v.version, v.state, v.error?.code ?? null])).toEqual([
      [1, "serving", null],
      [2, "failed", "canary_equals_base"],
    ]);
    expect(reopened.get(name, 1)).toMatchObject({ hash: "h1", step: 1, canaryDelta: 0.5 });
    expect(reopened.names()).toEqual([name]);
    reopened.close();
  });
});
