import { BaseModelInfo, type CompletionRequest, CompletionResult } from "@bridle/contracts";
import { callJson } from "@bridle/service-kit";

export interface ActivityDeps {
  /** Base URL of the serving service. */
  servingUrl: string;
}

/**
 * Activities are built by a factory so their dependencies (service URLs, clients) are injected
 * by the worker and replaceable in tests. Each activity is a plain HTTP call to a service.
 */
export function createActivities(deps: ActivityDeps) {
  return {
    /** Asks the serving service which base model and adapters the model server has. */
    async describeModel(): Promise<BaseModelInfo> {
      return callJson(`${deps.servingUrl}/v1/base-model`, { schema: BaseModelInfo });
    },

    /** Asks the serving service for a short completion with token ids and logprobs. */
    async sampleCompletion(request: CompletionRequest): Promise<CompletionResult> {
      return callJson(`${deps.servingUrl}/v1/completions`, {
        schema: CompletionResult,
        body: request,
        timeoutMs: 120_000,
      });
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
