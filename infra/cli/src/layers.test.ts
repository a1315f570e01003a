import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { repoRoot } from "@bridle/service-kit";
import { describe, expect, it } from "vitest";

/**
 * The house's layers, read from the tree itself: packages at the bottom, then the services, the
 * workflows, the gateway that starts them, the CLI on top and the end-to-end tests above all.
 * An import may only point down (or sideways inside one package); services never use each other.
 */
const LAYERS: [RegExp, number][] = [
  [/^packages\//, 0],
  [/^services\/gateway$/, 3],
  [/^services\//, 1],
  [/^workflows$/, 2],
  [/^infra\/cli$/, 4],
  [/^test$/, 5],
];

interface Workspace {
  name: string;
  dir: string;
  layer: number;
  declared: Set<string>;
}

function workspaces(): Workspace[] {
  const dirs = ["packages", "services"].flatMap((top) =>
    readdirSync(join(repoRoot, top)).map((d) => `${top}/${d}`),
  );
  return [...dirs, "workflows", "infra/cli", "test"]
    .filter((dir) => existsSync(join(repoRoot, dir, "package.json")))
    .map((dir) => {
      const pkg = JSON.parse(readFileSync(join(repoRoot, dir, "package.json"), "utf8"));
      const layer = LAYERS.find(([pattern]) => pattern.test(dir))?.[1];
      if (layer === undefined) throw new Error(`${dir}: in no layer; add it to LAYERS`);
      const deps = { ...pkg.dependencies, ...pkg.devDependencies };
      return { name: pkg.name, dir, layer, declared: new Set(Object.keys(deps)) };
    });
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    if (entry === "node_modules" || entry.startsWith(".")) return [];
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(entry) ? [path] : [];
  });
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?\sfrom\s+"([^"]+)"/g;
const importsOf = (file: string) => [...readFileSync(file, "utf8").matchAll(IMPORT)].map((m) => m[1]!);

describe("the import graph", () => {
  const all = workspaces();
  const byName = new Map(all.map((w) => [w.name, w]));

  it("points down: no package depends on a higher layer, no service on another, nothing on the CLI", () => {
    const wrong: string[] = [];
    for (const w of all) {
      for (const dep of w.declared) {
        const target = byName.get(dep);
        if (!target) continue;
        if (target.layer > w.layer) wrong.push(`${w.name} -> ${dep} (runs back up)`);
        if (target.layer === 1 && w.layer === 1) wrong.push(`${w.name} -> ${dep} (a service on a service)`);
      }
    }
    expect(wrong).toEqual([]);
    expect(all.filter((w) => w.declared.has("@bridle/cli")).map((w) => w.name)).toEqual([]);
  });

  it("imports only the workspace packages each package declares", () => {
    const undeclared: string[] = [];
    for (const w of all) {
      for (const file of sourceFiles(join(repoRoot, w.dir))) {
        for (const spec of importsOf(file)) {
          const name = /^@bridle\/[^/]+/.exec(spec)?.[0];
          if (name && name !== w.name && !w.declared.has(name))
            undeclared.push(`${relative(repoRoot, file)} imports ${spec}`);
        }
      }
    }
    expect(undeclared).toEqual([]);
  });

  it("has no circle of files importing each other", () => {
    const edges = new Map<string, string[]>();
    for (const w of all) {
      for (const file of sourceFiles(join(repoRoot, w.dir))) {
        const targets = importsOf(file)
          .filter((spec) => spec.startsWith("."))
          .map((spec) => resolve(dirname(file), spec));
        edges.set(file, targets);
      }
    }
    // Tarjan's strongly connected components: any component of two or more files is a circle.
    const index = new Map<string, number>();
    const low = new Map<string, number>();
    const stack: string[] = [];
    const onStack = new Set<string>();
    const circles: string[][] = [];
    let counter = 0;
    const visit = (v: string) => {
      index.set(v, counter);
      low.set(v, counter++);
      stack.push(v);
      onStack.add(v);
      for (const w of edges.get(v) ?? []) {
        if (!index.has(w)) {
          visit(w);
          low.set(v, Math.min(low.get(v)!, low.get(w)!));
        } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
      if (low.get(v) === index.get(v)) {
        const component: string[] = [];
        let w: string;
        do {
          w = stack.pop()!;
          onStack.delete(w);
          component.push(relative(repoRoot, w));
        } while (w !== v);
        if (component.length > 1) circles.push(component.sort());
      }
    };
    for (const file of edges.keys()) if (!index.has(file)) visit(file);
    expect(circles).toEqual([]);
  });
});
