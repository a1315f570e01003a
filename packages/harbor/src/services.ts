import type { TaskServiceRef } from "@bridle/contracts";
import { type BuiltImage, type EnvironmentImages, ServiceStartError, TaskServices } from "@bridle/sandbox";
import { resolveTaskEnv } from "./env.ts";

/** A service as the runner, the verifier and the controls start it: its settings and its built image. */
export type BuiltService = Omit<TaskServiceRef, "image"> & { image: BuiltImage };

/**
 * Starts services whose images are at hand, `${VAR}` in each one's environment resolved from the
 * user's allow-list alone; a ServiceStartError naming the service when one cannot start.
 */
export async function startServices(
  services: readonly BuiltService[],
  options: { allowedEnv: readonly string[]; baseDir?: string | undefined },
): Promise<TaskServices> {
  const specs = services.map((service) => {
    const env = resolveTaskEnv(service.env, options.allowedEnv, process.env);
    if (!env.ok) throw new ServiceStartError(`service ${service.name}: ${env.problem}`);
    return { ...service, env: env.env };
  });
  return TaskServices.start(specs, options.baseDir ? { baseDir: options.baseDir } : {});
}

/**
 * Starts a task's services for one rollout or one verification (the runner's and the verifier's
 * way): each one's image found on this host or fetched from the tasks service by digest, `${VAR}`
 * in its environment resolved from the user's allow-list alone. Undefined when the task has none;
 * a ServiceStartError naming the service when one cannot start.
 */
export async function startTaskServices(
  services: readonly TaskServiceRef[],
  options: { images: EnvironmentImages | undefined; allowedEnv: readonly string[]; baseDir?: string },
): Promise<TaskServices | undefined> {
  if (services.length === 0) return undefined;
  const built: BuiltService[] = [];
  for (const service of services) {
    const image = options.images
      ? await options.images.find(service.image.digest).catch((err: unknown) => {
          throw new ServiceStartError(
            `service ${service.name}: its image ${service.image.tag} could not be fetched from the tasks service: ${err instanceof Error ? err.message : String(err)}`,
          );
        })
      : null;
    if (!image)
      throw new ServiceStartError(
        `service ${service.name} runs on the image ${service.image.tag}, which is not built on this host or by the tasks service${options.images ? "" : " (no IMAGES_HOME)"}`,
      );
    built.push({ ...service, image });
  }
  return startServices(built, options);
}
