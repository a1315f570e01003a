import { ErrorBody } from "@bridle/contracts";

/** Test helper: the error object of a Bridle error response, validated against the contract. */
export async function errorOf(res: Response): Promise<ErrorBody["error"]> {
  return ErrorBody.parse(await res.json()).error;
}

/** Test helper: the dotted issue paths of a 400, sorted. */
export async function issuePaths(res: Response): Promise<string[]> {
  return ((await errorOf(res)).issues ?? []).map((i) => i.path).sort();
}

export interface OpenApiDoc {
  openapi: string;
  info: { title: string };
  paths: Record<string, unknown>;
}

/** Test helper: a service's OpenAPI document. */
export async function openApiOf(res: Response): Promise<OpenApiDoc> {
  return (await res.json()) as OpenApiDoc;
}
