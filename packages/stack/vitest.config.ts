import { defineConfig } from "vitest/config";

// The launcher's tests spawn real processes; the machine is small and shared.
export default defineConfig({ test: { testTimeout: 60_000, hookTimeout: 60_000 } });
