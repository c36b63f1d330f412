// A peer's tool list, followed across every page and filtered by the entry's grant. Broken pagination
// and oversize are explicit errors, never a silently short list. Cached briefly per exact entry.
import type { Tool } from "@modelcontextprotocol/client";
import { ReplError } from "../errors.ts";
import {
  BROKER_CATALOGUE_ENTRIES,
  BROKER_CATALOGUE_MAX_BYTES,
  BROKER_CATALOGUE_MAX_PAGES,
  BROKER_CATALOGUE_MAX_TOOLS,
  BROKER_CATALOGUE_TTL_MS,
} from "../limits.ts";
import { sizeText } from "../text/size.ts";
import { utf8Bytes } from "../text/utf8.ts";
import type { ServerEntry } from "./config.ts";
import type { Connection } from "./connections.ts";

export type { Tool };

const fail = (message: string) => new ReplError("MCP_PROTOCOL", message);

export function granted(entry: ServerEntry, tool: string): boolean {
  return entry.allowedTools === undefined || entry.allowedTools.includes(tool);
}

const entryKeys = new WeakMap<ServerEntry, string>();

/** Catalogues are cached by the whole entry (its grants shape the list); entries are immutable. */
function entryKey(entry: ServerEntry): string {
  let key = entryKeys.get(entry);
  if (key === undefined) {
    key = JSON.stringify(entry);
    entryKeys.set(entry, key);
  }
  return key;
}

export class Catalogues {
  private readonly cache = new Map<string, { at: number; tools: Tool[] }>();

  /** The cached list for an entry and its age, if any (explain reads this without connecting). */
  cached(entry: ServerEntry): { ageMs: number; tools: Tool[] } | undefined {
    const hit = this.cache.get(JSON.stringify(entry));
    return hit ? { ageMs: Date.now() - hit.at, tools: hit.tools } : undefined;
  }

  async load(
    connection: Connection,
    entry: ServerEntry,
    deadline: number,
    signal?: AbortSignal,
  ): Promise<Tool[]> {
    const key = entryKey(entry);
    const hit = this.cache.get(key);
    if (hit && Date.now() - hit.at < BROKER_CATALOGUE_TTL_MS) return hit.tools;
    const tools: Tool[] = [];
    const names = new Set<string>();
    const cursors = new Set<string>();
    let bytes = 0;
    let cursor: string | undefined;
    for (let page = 0; ; page++) {
      if (page >= BROKER_CATALOGUE_MAX_PAGES) throw fail("MCP tool catalogue has more than 128 pages");
      const timeout = deadline - Date.now();
      if (timeout <= 0) throw new ReplError("DEADLINE_EXCEEDED", "MCP deadline exceeded while listing tools");
      const result = await connection.client.request(
        { method: "tools/list", params: cursor === undefined ? {} : { cursor } },
        { timeout, signal },
      );
      for (const tool of result.tools) {
        if (names.has(tool.name))
          throw fail("MCP tool catalogue lists a tool name twice; the peer is inconsistent");
        names.add(tool.name);
        if (names.size > BROKER_CATALOGUE_MAX_TOOLS) throw fail("MCP tool catalogue exceeds 10000 tools");
        if (!granted(entry, tool.name)) continue;
        bytes += utf8Bytes(JSON.stringify(tool));
        if (bytes > BROKER_CATALOGUE_MAX_BYTES)
          throw fail(
            `MCP tool catalogue exceeds ${sizeText(BROKER_CATALOGUE_MAX_BYTES)} of granted definitions`,
          );
        tools.push(tool);
      }
      cursor = result.nextCursor;
      if (cursor === undefined) break;
      if (cursors.has(cursor))
        throw fail("MCP tool catalogue repeated a page cursor; the peer's pagination loops");
      cursors.add(cursor);
    }
    this.cache.delete(key);
    this.cache.set(key, { at: Date.now(), tools });
    while (this.cache.size > BROKER_CATALOGUE_ENTRIES)
      this.cache.delete(this.cache.keys().next().value as string);
    return tools;
  }

  clear(): void {
    this.cache.clear();
  }
}
