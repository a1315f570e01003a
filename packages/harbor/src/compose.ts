import { posix } from "node:path";
import type { TaskServiceRef } from "@bridle/contracts";
import { parse as parseYaml } from "yaml";
import type { TaskDockerfile } from "./dockerfile.ts";
import type { TreeFile } from "./files.ts";

/**
 * A service beside the task's container, from its compose file: built from its own Dockerfile
 * (compose's `build`) or from its `image` alone, and run with its command, environment and health
 * check. The runner, the verifier and the controls start it on a network that the task's sandbox
 * shares with its services alone, where it answers to its name.
 */
export interface TaskService extends Omit<TaskServiceRef, "image"> {
  /** What builds its image: its build context's Dockerfile, or `FROM <image>`. */
  dockerfile: TaskDockerfile;
}

/**
 * Keys of a compose service read here, or that change nothing here (one network, no published
 * ports, no names of the engine's); any other is refused by name.
 */
const KNOWN = new Set([
  "build",
  "image",
  "command",
  "environment",
  "healthcheck",
  "ports",
  "expose",
  "networks",
  "depends_on",
  "container_name",
  "restart",
  "hostname",
  "labels",
  "platform",
  "init",
  "stop_signal",
  "stop_grace_period",
  "shm_size",
  "ulimits",
  "deploy",
  "mem_limit",
  "cpus",
  "volumes",
]);

/**
 * The services of a compose file beside `main` (the task's own container), or what stands in the
 * way of running them: `files` are the task's files by their path in the task folder, `base` the
 * compose file's folder among them (build contexts are relative to it).
 */
export function composeSideServices(
  text: string,
  file: string,
  main: string,
  files: readonly TreeFile[],
  base: string,
): { services: TaskService[] } | { problem: string } {
  const services = composeServices(text, file);
  if (typeof services === "string") return { problem: services };
  const out: TaskService[] = [];
  for (const [name, raw] of Object.entries(services)) {
    if (name === main) continue;
    const read = sideService(name, raw, `${file}: services.${name}`, files, base);
    if ("problem" in read) return read;
    out.push(read);
  }
  return { services: out };
}

function sideService(
  name: string,
  raw: unknown,
  where: string,
  files: readonly TreeFile[],
  base: string,
): TaskService | { problem: string } {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/.test(name))
    return {
      problem: `${where}: the name is not a host name (letters, digits, _.-), so nothing can reach it`,
    };
  if (typeof raw !== "object" || raw === null || Array.isArray(raw))
    return { problem: `${where}: a mapping of the service's settings` };
  const spec = raw as Record<string, unknown>;
  const unsupported = Object.keys(spec).filter((key) => !KNOWN.has(key));
  // Only the engine's own mounts (Harbor's and Terminal-Bench's log folders, `${VAR}:${VAR}`) are
  // let pass: a volume of data or of the host's would not be there.
  const volumes = Array.isArray(spec.volumes)
    ? spec.volumes
    : spec.volumes === undefined
      ? []
      : [spec.volumes];
  if (volumes.some((v) => typeof v !== "string" || !/^\$\{[A-Za-z_][A-Za-z0-9_]*\}:/.test(v)))
    unsupported.push("volumes");
  if (unsupported.length > 0)
    return {
      problem: `${where}: ${unsupported.join(", ")}: not supported for a service beside the task's container (its build, image, command, environment and healthcheck are)`,
    };
  const dockerfile = serviceDockerfile(spec.build, spec.image, where, files, base);
  if ("problem" in dockerfile) return dockerfile;
  const command = commandOf(spec.command);
  if (command === undefined) return { problem: `${where}.command: a string or a list of strings` };
  const env = environmentOf(spec.environment);
  if (env === undefined)
    return { problem: `${where}.environment: a list of NAME=value or a mapping of names to values` };
  const healthcheck = healthcheckOf(spec.healthcheck);
  if (healthcheck === undefined)
    return { problem: `${where}.healthcheck.test: ["CMD", ...], ["CMD-SHELL", "..."] or a string` };
  const limits = (
    spec.deploy as { resources?: { limits?: { memory?: unknown; cpus?: unknown } } } | undefined
  )?.resources?.limits;
  const memoryMb = megabytes(spec.mem_limit ?? limits?.memory);
  const cpus = spec.cpus ?? limits?.cpus;
  const cpuCount = cpus === undefined ? null : Number(cpus);
  if (memoryMb === undefined) return { problem: `${where}: memory limit: a size such as 512m or 4g` };
  if (cpuCount !== null && !(cpuCount > 0)) return { problem: `${where}: cpus: a positive number` };
  return { name, dockerfile, command, env, healthcheck, memoryMb, cpus: cpuCount };
}

/** A compose size (bytes, or with b, k, m, g and an optional b) in MiB, rounded up; null when absent. */
function megabytes(value: unknown): number | null | undefined {
  if (value === undefined || value === null) return null;
  const match = /^(\d+(?:\.\d+)?)\s*([bkmg]?)b?$/i.exec(String(value).trim());
  if (!match) return undefined;
  const scale = { "": 1, b: 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30 }[match[2]!.toLowerCase()] ?? 1;
  const mb = Math.ceil((Number(match[1]) * scale) / 2 ** 20);
  return mb > 0 ? mb : undefined;
}

/** The service's Dockerfile: its build context's (relative to the compose file), else `FROM <image>`. */
function serviceDockerfile(
  build: unknown,
  image: unknown,
  where: string,
  files: readonly TreeFile[],
  base: string,
): TaskDockerfile | { problem: string } {
  if (build !== undefined) {
    const read = buildContext(build, base);
    if (read === "shape")
      return { problem: `${where}.build: a context folder, or a mapping with context and dockerfile` };
    if (read === "outside")
      return { problem: `${where}.build.context: ${contextOf(build)} lies outside the task's folder` };
    const name = read.dockerfile;
    const prefix = read.folder ? `${read.folder}/` : "";
    const inContext = files
      .filter((f) => f.path.startsWith(prefix))
      .map((f) => ({ ...f, path: f.path.slice(prefix.length) }));
    const dockerfile = inContext.find((f) => f.path === name);
    if (!dockerfile) return { problem: `${where}.build: ${prefix}${name}: missing` };
    return {
      name: `${prefix}${name}`,
      content: dockerfile.content.toString("utf8"),
      context: inContext,
      withoutImage: [],
    };
  }
  if (typeof image === "string" && image.trim() !== "" && !image.includes("$"))
    return { name: `${where}.image`, content: `FROM ${image.trim()}\n`, context: [], withoutImage: [] };
  return { problem: `${where}: neither a build nor an image to run it from` };
}

/** A compose command: a list as it is, a string through the shell. Undefined when it is neither. */
function commandOf(value: unknown): string[] | null | undefined {
  if (value === undefined || value === null) return null;
  if (typeof value === "string") return ["/bin/sh", "-c", value];
  if (Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === "string")) return value;
  return undefined;
}

function environmentOf(value: unknown): Record<string, string> | undefined {
  if (value === undefined || value === null) return {};
  if (Array.isArray(value)) {
    const env: Record<string, string> = {};
    for (const item of value) {
      if (typeof item !== "string") return undefined;
      const at = item.indexOf("=");
      if (at > 0) env[item.slice(0, at)] = item.slice(at + 1);
    }
    return env;
  }
  if (typeof value === "object")
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, v === null ? "" : String(v)]),
    );
  return undefined;
}

/** compose's healthcheck as a command, null when there is none (or it is disabled). */
function healthcheckOf(value: unknown): string[] | null | undefined {
  if (value === undefined || value === null) return null;
  const check = value as { test?: unknown; disable?: unknown };
  if (check.disable === true || check.test === undefined) return null;
  const test = check.test;
  if (typeof test === "string") return ["/bin/sh", "-c", test];
  if (!Array.isArray(test) || !test.every((t) => typeof t === "string")) return undefined;
  const [kind, ...rest] = test as string[];
  if (kind === "NONE") return null;
  if (kind === "CMD" && rest.length > 0) return rest;
  if (kind === "CMD-SHELL" && rest.length === 1) return ["/bin/sh", "-c", rest[0]!];
  return undefined;
}

/**
 * A Terminal-Bench 1 compose file, read once: what is wrong with it, or where the task's container
 * mounts the task's own `tests/` folder (`./tests:/app/tests:ro`, as tasks written after
 * Terminal-Bench 1's own do, so that run-tests.sh finds them from the workdir), and the services
 * beside it. Terminal-Bench's own tasks name the task's container `client`, later tasks as they
 * like (`agent-environment`), so a file of one service describes the task's container.
 */
export function readTb1Compose(
  text: string,
  file: string,
  files: readonly TreeFile[],
):
  | { problem: string }
  | {
      testMounts: string[];
      services: TaskService[];
      /** Where the task's container is built from, when its service names a build context. */
      build: { context: string; dockerfile: string } | null;
    } {
  const services = composeServices(text, file);
  if (typeof services === "string") return { problem: services };
  const names = Object.keys(services);
  const main = names.length === 1 ? names[0]! : "client";
  if (names.length > 1 && !names.includes("client"))
    return {
      problem: `${file}: services ${names.join(", ")}: none is \`client\`, so none is known as the task's container`,
    };
  const beside = composeSideServices(text, file, main, files, "");
  if ("problem" in beside) return beside;
  const own = services[main] as { volumes?: unknown; build?: unknown } | null | undefined;
  const build = buildOf(own?.build);
  if (build === undefined)
    return {
      problem: `${file}: services.${main}.build: a context folder inside the task's, or a mapping with context and dockerfile`,
    };
  const volumes = own?.volumes;
  if (!Array.isArray(volumes)) return { testMounts: [], services: beside.services, build };
  const testMounts = volumes.flatMap((volume) => {
    if (typeof volume !== "string") return [];
    const [source, target] = volume.split(":");
    const inside = target && posix.normalize(target);
    // A plain absolute path (it is written into the verifier's script), not the root or /tests.
    return source &&
      /^(\.\/)?tests\/?$/.test(source) &&
      inside &&
      inside !== "/tests" &&
      /^\/[\w.-][\w./-]*$/.test(inside)
      ? [inside.replace(/\/$/, "")]
      : [];
  });
  return { testMounts, services: beside.services, build };
}

/** A service's build context folder (normalised, inside the task's) and Dockerfile; null for the folder itself. */
function buildOf(build: unknown): { context: string; dockerfile: string } | null | undefined {
  if (build === undefined || build === null) return null;
  const read = buildContext(build, "");
  if (typeof read === "string") return undefined;
  return read.folder === "" && read.dockerfile === "Dockerfile"
    ? null
    : { context: read.folder, dockerfile: read.dockerfile };
}

/** compose's `build.context` as written (its default, the compose file's folder, is `.`). */
const contextOf = (build: unknown): unknown =>
  typeof build === "string" ? build : ((build as { context?: unknown } | null)?.context ?? ".");

/**
 * A compose `build` (a context folder, or a mapping with context and dockerfile): its folder among
 * the task's files (`base` joined, normalised, "" for the task's own folder) and its Dockerfile's
 * name; "shape" when it is neither form, "outside" when the folder leaves the task's.
 */
function buildContext(
  build: unknown,
  base: string,
): { folder: string; dockerfile: string } | "shape" | "outside" {
  const context = contextOf(build);
  const dockerfile =
    typeof build === "object" && build !== null
      ? ((build as { dockerfile?: unknown }).dockerfile ?? "Dockerfile")
      : "Dockerfile";
  if (typeof context !== "string" || typeof dockerfile !== "string") return "shape";
  // Harbor's own variable for the environment folder, as its adapters' templates write it.
  const folder = posix
    .normalize(posix.join(base, context.replace(/^\$\{CONTEXT_DIR\}/, ".")))
    .replace(/\/$/, "");
  if (folder.startsWith("..") || posix.isAbsolute(folder)) return "outside";
  return { folder: folder === "." ? "" : folder, dockerfile: posix.normalize(dockerfile) };
}

/** The services mapping of a compose file (empty when it has none), or what is wrong with it. */
function composeServices(text: string, file: string): Record<string, unknown> | string {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    return `${file}: not valid YAML: ${(err as Error).message.split("\n")[0]}`;
  }
  const services = (doc as { services?: unknown } | null)?.services;
  if (services === undefined || services === null) return {};
  if (typeof services !== "object" || Array.isArray(services))
    return `${file}: services: a mapping of service names, got ${Array.isArray(services) ? "a list" : typeof services}`;
  return services as Record<string, unknown>;
}
