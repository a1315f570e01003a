import { join } from "node:path";
import { BaseEnv, loadEnv, Port, repoRoot } from "@bridle/service-kit";
import { z } from "zod";

/** The install folder by default: the worker runs the Python of its venv. */
const home = join(repoRoot, ".bridle");

export const TrainerEnv = BaseEnv.extend({
  PORT: Port.default(8706),
  TRAINER_PYTHON: z
    .string()
    .min(1)
    .default(join(home, "venv", "bin", "python")),
  TRAINER_MODEL_DIR: z
    .string()
    .min(1)
    .default(join(home, "models", "smollm2-135m-instruct")),
  TRAINER_DATA_DIR: z
    .string()
    .min(1)
    .default(join(home, "data", "trainer"))
    .describe("Step records"),
  TRAINER_DEVICE: z
    .string()
    .regex(/^(auto|cpu|cuda(:\d+)?)$/, "auto, cpu, cuda or cuda:N")
    .default("auto"),
  TRAINER_PRECISION: z
    .enum(["fp32", "bf16"])
    .default("fp32")
    .describe("Matmul number format: bf16 (fp32 master weights) where the CPU has AMX or AVX512-BF16"),
  TRAINER_RESTART_DELAY_MS: z.coerce.number().int().nonnegative().default(1_000),
});
export type TrainerEnv = z.infer<typeof TrainerEnv>;

export const loadTrainerEnv = (source?: Record<string, string | undefined>) =>
  loadEnv("trainer", TrainerEnv, source);
