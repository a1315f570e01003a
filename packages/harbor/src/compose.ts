import { posix } from "node:path";
import { parse as parseYaml } from "yaml";

/**
 * What a task's compose file asks beyond the task's own container. Harbor merges a task's
 * `environment/docker-compose.yaml` over its own, where the service `main` is the task's container
 * (Terminal-Bench 1 calls it `client`); any other service is a second container the agent or the
 * tests reach by name over a network (an MCP server, an API). Bridle runs each task in one
 * environment with no network but the guard, so such a task cannot run here: it is refused, naming
 * the services, instead of failing its controls on a host name that does not resolve.
 */
export function composeProblem(text: string, file: string, main: string): string | undefined {
  const services = composeServices(text, file);
  return typeof services === "string" ? services : besideProblem(Object.keys(services), file, main);
}

/**
 * A Terminal-Bench 1 compose file, read once: what is wrong with it, or where its one service mounts
 * the task's own `tests/` folder (`./tests:/app/tests:ro`, as tasks written after Terminal-Bench 1's
 * own do, so that run-tests.sh finds them from the workdir). The file is the whole environment:
 * Terminal-Bench's own tasks name the task's container `client`, later tasks as they like
 * (`agent-environment`), so a file of one service describes the task's container.
 */
export function readTb1Compose(text: string, file: string): { problem: string } | { testMounts: string[] } {
  const services = composeServices(text, file);
  if (typeof services === "string") return { problem: services };
  const names = Object.keys(services);
  if (names.length !== 1) {
    const problem = besideProblem(names, file, "client");
    return problem ? { problem } : { testMounts: [] };
  }
  const volumes = (Object.values(services)[0] as { volumes?: unknown } | null)?.volumes;
  if (!Array.isArray(volumes)) return { testMounts: [] };
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
  return { testMounts };
}

/** The services beside `main`, refused by name; undefined when there are none. */
function besideProblem(names: string[], file: string, main: string): string | undefined {
  const beside = names.filter((name) => name !== main);
  if (beside.length === 0) return undefined;
  const [them, run, are] = beside.length === 1 ? ["service", "runs", "is"] : ["services", "run", "are"];
  return `${file}: ${them} ${beside.join(", ")} ${run} beside the task's container and ${are} reached over a network: Bridle runs a task in one environment whose only way out is the guard, so multi-container tasks are not supported`;
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
