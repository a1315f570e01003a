import { z } from "zod";

/** One zod issue, flattened for clients: where in the input, and what is wrong there. */
export const Issue = z.object({
  path: z.string().describe("Dotted path into the request, e.g. `body.maxTokens`"),
  message: z.string(),
});
export type Issue = z.infer<typeof Issue>;

/** The body of every error response from every Bridle service. */
export const ErrorBody = z.object({
  error: z.object({
    code: z.string().describe("Stable machine-readable code, e.g. `invalid_request`"),
    message: z.string(),
    retryable: z.boolean().default(false),
    issues: z.array(Issue).optional(),
    requestId: z.string().optional(),
  }),
});
export type ErrorBody = z.infer<typeof ErrorBody>;
