// What every agent-client harness shares: the record a run returns (each client adds its own fields),
// repl-mcp started behind the stdio recorder, the recorder's transcript, and an environment that keeps
// the client away from the developer's own configuration.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { homeEnv } from "../home.ts";
import type { Seen } from "./script.ts";

const RECORD = join(import.meta.dir, "../record-stdio.ts");

/** Every stdio JSON-RPC line client <-> repl-mcp, in order (a line that is not JSON is kept as text). */
export type Transcript = { from: "client" | "server"; message: any }[];

export interface AgentRun {
  /** Step name -> what the model saw for that step's tool call. */
  seen: Map<string, Seen>;
  /** The repl tools as the model got them, named as the client named them to the model. */
  tools: { name: string; description: string; schema?: unknown }[];
  /** The client's stdout (its event stream), for debugging. */
  answer: string;
  transcript: Transcript;
  /** Raw model-API request bodies, in order. */
  requests: unknown[];
}

/** The arguments, after `process.execPath`, that start `server` behind the recorder writing `file`. */
export function recorded(file: string, server: string[]): string[] {
  return [RECORD, file, "--", ...server];
}

export function readTranscript(file: string): Transcript {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as { from: "client" | "server"; line: string })
    .map(({ from, line }) => {
      try {
        return { from, message: JSON.parse(line) };
      } catch {
        return { from, message: line };
      }
    });
}

/** PATH, and a HOME and XDG directories of the run's own, so nothing of the developer's is read. */
export function isolatedEnv(home: string, variables: Record<string, string>): Record<string, string> {
  return { ...homeEnv(home), ...variables };
}

/** How a client opened its connection, read the same way in both eras, and what the server answered. */
export function openingOf(transcript: Transcript) {
  const first = transcript.find((entry) => entry.from === "client")?.message;
  const answer = transcript.find(
    (entry) => entry.from === "server" && entry.message?.id === first?.id,
  )?.message;
  const modern = first?.method === "server/discover";
  const meta = first?.params?._meta ?? {};
  return {
    method: first?.method,
    revision: modern ? meta["io.modelcontextprotocol/protocolVersion"] : first?.params?.protocolVersion,
    client: modern ? meta["io.modelcontextprotocol/clientInfo"]?.name : first?.params?.clientInfo?.name,
    answered: modern ? answer?.result?.supportedVersions : answer?.result?.protocolVersion,
    initializes: transcript.filter(
      (entry) => entry.from === "client" && entry.message?.method === "initialize",
    ).length,
  };
}
