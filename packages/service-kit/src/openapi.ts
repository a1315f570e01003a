import { ErrorBody } from "@bridle/contracts";
import type { z } from "zod";

/** An OpenAPI response whose body is JSON matching `schema`. */
export const jsonContent = <T extends z.ZodType>(schema: T, description: string) => ({
  description,
  content: { "application/json": { schema } },
});

/** An OpenAPI error response: every Bridle service answers errors with ErrorBody. */
export const errorContent = (description: string) => jsonContent(ErrorBody, description);

/** An OpenAPI request body of JSON matching `schema`; `required: false` lets a request omit it. */
export const jsonBody = <T extends z.ZodType>(schema: T, required = true) => ({
  content: { "application/json": { schema } },
  required,
});
