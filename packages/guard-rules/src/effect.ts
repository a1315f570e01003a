/** What a tool call would do, as the rules see it. */
export type Effect =
  | { kind: "write"; path: string; content?: string; how: string }
  | { kind: "read"; path: string; how: string }
  | { kind: "network"; host: string; how: string }
  | { kind: "history"; how: string }
  | { kind: "exec"; argv: string[] };
