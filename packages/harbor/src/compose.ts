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
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    return `${file}: not valid YAML: ${(err as Error).message.split("\n")[0]}`;
  }
  const services = (doc as { services?: unknown } | null)?.services;
  if (services === undefined || services === null) return undefined;
  if (typeof services !== "object" || Array.isArray(services))
    return `${file}: services: a mapping of service names, got ${Array.isArray(services) ? "a list" : typeof services}`;
  const beside = Object.keys(services).filter((name) => name !== main);
  if (beside.length === 0) return undefined;
  const [them, run, are] = beside.length === 1 ? ["service", "runs", "is"] : ["services", "run", "are"];
  return `${file}: ${them} ${beside.join(", ")} ${run} beside the task's container and ${are} reached over a network: Bridle runs a task in one environment whose only way out is the guard, so multi-container tasks are not supported`;
}
