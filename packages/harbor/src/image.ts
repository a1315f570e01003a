import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import {
  type BuiltImage,
  dockerfileInstructions,
  type EnvironmentImages,
  ImageBuildError,
} from "@bridle/sandbox";
import type { TaskService } from "./compose.ts";
import { writeTree } from "./files.ts";
import type { HarborTask } from "./load.ts";
import {
  type HeldWheel,
  type NpmInstalls,
  type RequirementGroup,
  taskDebianPackages,
  taskNpmInstalls,
  taskRequirements,
  wheelsHeld,
} from "./packages.ts";

/** Where an image holds the wheels of what the task's scripts install, and uv (see withPackages). */
export const PACKAGES_DIR = "/opt/bridle/packages";
const UV_DIR = "/opt/bridle/uv";

/** A task's image as far as this host can make it: the image, what to say about it, or why it is refused. */
export interface TaskImage {
  /** The built image; null for a task without a Dockerfile or a host without an image engine. */
  image: BuiltImage | null;
  /** The services beside the task's container, each with its built image. */
  services: { service: TaskService; image: BuiltImage }[];
  notes: string[];
  /** Why the task is refused: its Dockerfile does not build (the line named where one is to blame). */
  problem?: string;
}

/**
 * Builds a task's Dockerfile (cached by digest) where `images` can, so its sandboxes run on the
 * image; elsewhere the task runs in bubblewrap on the host's tools, and the notes say what that
 * leaves out.
 */
export async function taskImage(
  task: HarborTask,
  images: EnvironmentImages | undefined,
  options: { toolchain?: string | undefined } = {},
): Promise<TaskImage> {
  const dockerfile = task.dockerfile;
  const why = images ? await images.unavailable() : "no image engine is configured";
  if (task.services.length > 0 && (!images || why))
    return {
      image: null,
      services: [],
      notes: [],
      problem: `services ${task.services.map((s) => s.name).join(", ")}: each runs on an image of its own, and no image can be built here (${why})`,
    };
  const services = images ? await serviceImages(task.services, images) : [];
  if (!Array.isArray(services)) return { image: null, services: [], notes: [], problem: services.problem };
  const said = services.flatMap(({ service, image }) => [
    `service ${service.name}: ${service.dockerfile.name} built (${builtFrom(image)})`,
    ...image.substitutions.map((line) => `service ${service.name}: ${line}`),
  ]);
  if (!dockerfile) return { image: null, services, notes: said };
  if (!images || why) {
    const [first = "", ...rest] = dockerfile.withoutImage;
    return { image: null, services, notes: [first.replace("not built;", `not built (${why});`), ...rest] };
  }
  const toolchain = await toolchainOf(options.toolchain);
  const scripts = [task.tests, task.solution, ...task.steps.flatMap((s) => [s.tests, s.solution])].flat();
  const requirements = taskRequirements(scripts, toolchain.wheels);
  const packages =
    requirements.length > 0 ? withPackages(dockerfile.content, requirements, toolchain.uv) : null;
  const debs = taskDebianPackages(scripts);
  const apt = debs.length > 0 ? withDebianPackages(packages?.dockerfile ?? dockerfile.content, debs) : null;
  const npmInstalls = taskNpmInstalls(scripts);
  const npm =
    npmInstalls.project || npmInstalls.packages.length > 0
      ? withNpmPackages(apt?.dockerfile ?? packages?.dockerfile ?? dockerfile.content, npmInstalls)
      : null;
  const context = await mkdtemp(join(tmpdir(), "bridle-build-context-"));
  try {
    await writeTree(context, dockerfile.context);
    const image = await images.build(
      npm?.dockerfile ?? apt?.dockerfile ?? packages?.dockerfile ?? dockerfile.content,
      context,
      dockerfile.name,
    );
    return {
      image,
      services,
      notes: [
        `${dockerfile.name}: built (${builtFrom(image)}); the agent and the tests run on its system`,
        ...image.substitutions,
        ...(packages ? [packages.note] : []),
        ...(apt ? [apt.note] : []),
        ...(npm ? [npm.note] : []),
        ...said,
        ...(packages || apt || npm ? await unavailablePackages(image) : []).map(
          (line) => `not fetched, so its install fails offline in the sandbox: ${line}`,
        ),
      ],
    };
  } catch (err) {
    if (err instanceof ImageBuildError) return { image: null, services: [], notes: [], problem: err.message };
    throw err;
  } finally {
    await rm(context, { recursive: true, force: true });
  }
}

/** An image's tag, and how long its build took or that it was cached. */
const builtFrom = (image: BuiltImage) =>
  `${image.tag}${image.buildSeconds > 0 ? `, ${image.buildSeconds} s` : ", cached"}`;

/** Each service's image, built from its own Dockerfile and context (cached by digest), or why one is refused. */
async function serviceImages(
  services: readonly TaskService[],
  images: EnvironmentImages,
): Promise<{ service: TaskService; image: BuiltImage }[] | { problem: string }> {
  const built: { service: TaskService; image: BuiltImage }[] = [];
  for (const service of services) {
    const context = await mkdtemp(join(tmpdir(), "bridle-build-context-"));
    try {
      await writeTree(context, service.dockerfile.context);
      built.push({
        service,
        image: await images.build(service.dockerfile.content, context, service.dockerfile.name),
      });
    } catch (err) {
      if (err instanceof ImageBuildError) return { problem: `service ${service.name}: ${err.message}` };
      throw err;
    } finally {
      await rm(context, { recursive: true, force: true });
    }
  }
  return built;
}

/** The verifier toolchain's wheels and its uv's version, where the host has one. */
async function toolchainOf(
  dir: string | undefined,
): Promise<{ wheels: Map<string, HeldWheel>; uv: string | undefined }> {
  if (!dir) return { wheels: new Map(), uv: undefined };
  const list = (folder: string) => readdir(join(dir, folder)).catch(() => [] as string[]);
  const uv = (await list("python"))
    .map((name) => name.match(/^uv-([0-9][0-9A-Za-z.+]*)\.dist-info$/)?.[1])
    .find((v) => v !== undefined);
  return { wheels: wheelsHeld(await list("wheels")), uv };
}

/**
 * The newest manylinux a wheel for another Python than the image's may need: the bases are
 * Debian 12, glibc 2.36 (pip takes every older manylinux with it).
 */
const MANYLINUX = "manylinux_2_36";

const describe = (group: RequirementGroup) =>
  `${group.requirements.join(" ")}${group.python ? ` (for Python ${group.python})` : ""}`;

/**
 * The build requirements of the project at the image's WORKDIR (`[build-system] requires` of its
 * pyproject.toml, read with the image's Python where it has tomllib), fetched beside the scripts'
 * packages: a test.sh's `uv run` or `pip install .` builds the project again, offline, as
 * `uv init` projects (uv_build) do. A shell fragment of withPackages' RUN, globbing off.
 */
const BUILD_REQUIRES = (pip: string, why: string) =>
  `if [ -f pyproject.toml ]; then breq=$(python3 -c 'import sys, tomllib; print(" ".join(tomllib.load(open("pyproject.toml", "rb")).get("build-system", {}).get("requires", [])))' 2>/dev/null); [ -z "$breq" ] || ${pip} download --prefer-binary --dest ${PACKAGES_DIR} $breq >/dev/null 2>/tmp/.bridle-fetch || echo "pyproject.toml build-system.requires $breq: "${why} >> ${UNAVAILABLE}; fi`;

/** Where the image notes the install commands whose packages could not be fetched, and why. */
const UNAVAILABLE = "/opt/bridle/unavailable-packages";

/**
 * The task's Dockerfile with a last step of Bridle's: the Python packages its scripts install at
 * run time (`taskRequirements`), fetched from PyPI while the image builds, since builds reach PyPI
 * and sandboxes do not, as wheels in PACKAGES_DIR; uv beside them (pinned to the toolchain's), as
 * a test.sh or solve.sh that runs uv's installer would have it; and pip and uv pointed at them,
 * offline. Each of the scripts' install commands is fetched on its own, with its dependencies, for
 * the image's own Python, so a pin and a later unpinned ask both stand. One that cannot be fetched
 * (no such version, none for this Python) fails nothing here: it is noted in UNAVAILABLE, and its
 * install fails in the sandbox as it would have. The final stage's USER is kept.
 */
export function withPackages(
  content: string,
  requirements: readonly RequirementGroup[],
  uvVersion: string | undefined,
): { dockerfile: string; note: string } {
  const user = finalUser(content);
  // Requirements are names, extras and versions only (scriptRequirements): nothing to quote in
  // them; globbing is off for a version such as ==2.*. Each item is `python|requirements`, `-`
  // for the image's own python3.
  const groups = requirements
    .map((group) => `'${group.python ?? "-"}|${group.requirements.join(" ")}'`)
    .join(" ");
  const uv = `uv${uvVersion ? `==${uvVersion}` : ""}`;
  const pip = "python3 -m pip --disable-pip-version-check --no-cache-dir";
  const why = `"$(tail -n 1 /tmp/.bridle-fetch)"`;
  const lines = [
    "# Bridle: what the task's scripts install at run time, fetched now for the offline sandbox.",
    ...(user ? ["USER root"] : []),
    `RUN set -f; mkdir -p ${PACKAGES_DIR}; : > ${UNAVAILABLE}; for item in ${groups}; do py=\${item%%|*}; req=\${item#*|}; for_py=; [ "$py" = - ] || for_py="--only-binary=:all: --python-version $py --platform ${MANYLINUX}_$(uname -m)"; ${pip} download --prefer-binary $for_py --dest ${PACKAGES_DIR} $req >/dev/null 2>/tmp/.bridle-fetch || echo "$req: "${why} >> ${UNAVAILABLE}; done; ${BUILD_REQUIRES(pip, why)}; ${pip} install --no-deps --quiet --target ${UV_DIR} ${uv} 2>/tmp/.bridle-fetch || echo "${uv}: "${why} >> ${UNAVAILABLE}; rm -f /tmp/.bridle-fetch`,
    ...(user ? [`USER ${user}`] : []),
    `ENV PIP_FIND_LINKS=${PACKAGES_DIR} PIP_NO_INDEX=1 UV_FIND_LINKS=${PACKAGES_DIR} UV_OFFLINE=1 UV_NO_INDEX=1 UV_PYTHON_DOWNLOADS=never PATH="\${PATH}:${UV_DIR}/bin"`,
  ];
  return {
    dockerfile: `${content.replace(/\n*$/, "")}\n\n${lines.join("\n")}\n`,
    note: `the Python packages its scripts install (${requirements.map(describe).join(" ")}), the build requirements of a pyproject.toml at its workdir, and ${uv}: fetched from PyPI while the image builds, as wheels in ${PACKAGES_DIR}, which pip and uv use offline in the sandbox`,
  };
}

/** The final stage's USER, where it sets one (Bridle's own steps run as root, then give it back). */
function finalUser(content: string): string | undefined {
  const instructions = dockerfileInstructions(content);
  const lastFrom = instructions.findLastIndex((i) => /^FROM\s/i.test(i.text));
  return instructions
    .slice(lastFrom + 1)
    .findLast((i) => /^USER\s/i.test(i.text))
    ?.text.replace(/^USER\s+/i, "");
}

/**
 * The task's Dockerfile with a last step of Bridle's for the Debian packages its scripts install
 * with apt at run time (`taskDebianPackages`), where Harbor's containers reach Debian's mirrors and
 * sandboxes do not: those the image does not have are downloaded while it builds, with apt's
 * package lists, so the scripts' `apt-get update` (which keeps the lists it cannot refresh) and
 * `apt-get install` then install them offline, as they would have online. One that cannot be
 * fetched is noted in UNAVAILABLE, and its install fails in the sandbox as it would have.
 */
export function withDebianPackages(
  content: string,
  packages: readonly string[],
): { dockerfile: string; note: string } {
  const user = finalUser(content);
  // Names, architectures and versions only (scriptDebianPackages): nothing to quote; globbing off.
  const lines = [
    "# Bridle: the Debian packages the task's scripts install with apt, downloaded now for the offline sandbox.",
    ...(user ? ["USER root"] : []),
    `RUN set -f; mkdir -p ${dirname(UNAVAILABLE)}; touch ${UNAVAILABLE}; missing=; for p in ${packages.join(" ")}; do dpkg -s "\${p%%[:=]*}" >/dev/null 2>&1 || missing="$missing $p"; done; if [ -n "$missing" ]; then apt-get update -qq >/dev/null 2>&1; for p in $missing; do DEBIAN_FRONTEND=noninteractive apt-get install --download-only -y -qq "$p" >/dev/null 2>/tmp/.bridle-fetch || echo "apt-get install $p: $(grep -m1 '^E:' /tmp/.bridle-fetch || tail -n 1 /tmp/.bridle-fetch)" >> ${UNAVAILABLE}; done; rm -f /tmp/.bridle-fetch /etc/apt/apt.conf.d/docker-clean; fi`,
    ...(user ? [`USER ${user}`] : []),
  ];
  return {
    dockerfile: `${content.replace(/\n*$/, "")}\n\n${lines.join("\n")}\n`,
    note: `the system packages its scripts install with apt (${packages.join(" ")}): those the image lacks downloaded from the system's archive while it builds, with apt's lists, so apt installs them offline in the sandbox`,
  };
}

/** Where an image keeps npm's cache of what the task's scripts install with npm (see withNpmPackages). */
export const NPM_CACHE = "/opt/bridle/npm-cache";

/**
 * The task's Dockerfile with a last step of Bridle's for what its scripts install with npm
 * (`taskNpmInstalls`): fetched from the npm registry while the image builds into an npm cache in
 * the image, the project's dependencies from the package.json at its WORKDIR (installed in a copy
 * elsewhere, so the workspace is as the Dockerfile left it) and each package named; npm then
 * works offline from that cache in the sandbox, where it would otherwise wait minutes on a
 * registry it cannot reach. One that cannot be fetched is noted in UNAVAILABLE, and its install
 * fails in the sandbox as it would have. An image without npm gets nothing.
 */
export function withNpmPackages(
  content: string,
  installs: NpmInstalls,
): { dockerfile: string; note: string } {
  const user = finalUser(content);
  const npm = `npm install --cache ${NPM_CACHE} --no-audit --no-fund --ignore-scripts --loglevel=error`;
  // Names and versions only (scriptNpmInstalls), single-quoted for versions such as ^29 || 30.
  const named = installs.packages.map((p) => `'${p}'`).join(" ");
  const fetch = (what: string, args: string) =>
    `(cd "$t" && ${npm} ${args} >/dev/null 2>/tmp/.bridle-fetch) || echo "npm install ${what}: $(grep -m1 'ERR' /tmp/.bridle-fetch || tail -n 1 /tmp/.bridle-fetch)" >> ${UNAVAILABLE}`;
  const lines = [
    "# Bridle: what the task's scripts install with npm, fetched now for the offline sandbox.",
    ...(user ? ["USER root"] : []),
    `RUN set -f; if command -v npm >/dev/null; then mkdir -p ${NPM_CACHE} ${dirname(UNAVAILABLE)}; touch ${UNAVAILABLE}; t="$(mktemp -d)"; ${
      installs.project
        ? `if [ -f package.json ]; then cp package.json "$t/"; [ -f package-lock.json ] && cp package-lock.json "$t/"; ${fetch("(package.json)", "")}; fi; `
        : ""
    }${installs.packages.length > 0 ? `${fetch(installs.packages.join(" "), named)}; ` : ""}rm -rf "$t" /tmp/.bridle-fetch; chmod -R a+rwX ${NPM_CACHE}; fi`,
    ...(user ? [`USER ${user}`] : []),
    `ENV npm_config_cache=${NPM_CACHE}`,
  ];
  const what = [...(installs.project ? ["the dependencies of its package.json"] : []), ...installs.packages];
  return {
    dockerfile: `${content.replace(/\n*$/, "")}\n\n${lines.join("\n")}\n`,
    note: `what its scripts install with npm (${what.join(", ")}): fetched from the npm registry while the image builds, into npm's cache in ${NPM_CACHE}, from which npm installs offline in the sandbox`,
  };
}

/** What the image could not fetch of the packages its task's scripts install, one line each. */
async function unavailablePackages(image: BuiltImage): Promise<string[]> {
  const text = await readFile(join(image.rootfs, UNAVAILABLE), "utf8").catch(() => "");
  return text
    .split("\n")
    .map((line) => line.replace(/[^\x20-\x7e]/g, "").trim())
    .filter(Boolean)
    .slice(0, 10);
}
