/**
 * The stack's supervisor process, started in the background by `up`: it starts the components in
 * order, restarts one that exits, and stops them all when signalled.
 */
import { createLogger } from "@bridle/service-kit";
import { stackComponents } from "./components.ts";
import { loadStackConfig } from "./config.ts";
import { Supervisor } from "./supervisor.ts";

const config = loadStackConfig();
await new Supervisor(config, stackComponents(config), createLogger("supervisor", config.logLevel)).run();
