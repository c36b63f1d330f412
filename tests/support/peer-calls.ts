// The typed fixture peer as a registry entry that logs every tools/call it receives, and that log read
// back: how the approval tests tell what was really sent (exactly once, or never).
import { existsSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const TYPED_PEER = resolve(import.meta.dir, "../fixtures/peers/typed-peer.ts");

export class PeerCalls {
  readonly log = join(tmpdir(), `peer-calls-${crypto.randomUUID()}`);

  /** The typed peer over stdio, logging here; `policy` adds registry fields (approve, allowedTools). */
  entry(policy: Record<string, unknown> = {}) {
    return {
      command: process.execPath,
      args: [TYPED_PEER, "stdio"],
      env: { PEER_CALL_LOG: this.log },
      ...policy,
    };
  }

  /** The tools called so far, in order. */
  tools(): string[] {
    if (!existsSync(this.log)) return [];
    return readFileSync(this.log, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line).tool as string);
  }

  remove(): void {
    rmSync(this.log, { force: true });
  }
}

/** A cell calling typed.create_issue that ends with 'sent', or with the McpToolError's code. */
export function createIssueCell(title: string): string {
  return [
    "try:",
    `    mcp.typed.create_issue(title=${JSON.stringify(title)})`,
    "    out = 'sent'",
    "except mcp.McpToolError as e:",
    "    out = e.code",
    "out",
  ].join("\n");
}
