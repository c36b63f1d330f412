// What the tests that build a Debian root with mmdebstrap share: where the roots are kept between runs,
// and which mirror to take them from (the one apt already uses, since no other may be reachable).
import { readdirSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** Where built roots and images are kept between runs (REPL_MCP_TEST_CACHE, else ~/.cache/repl-mcp-tests). */
export function testCacheDir(): string {
  return process.env.REPL_MCP_TEST_CACHE ?? join(homedir(), ".cache", "repl-mcp-tests");
}

/** The first Debian mirror in apt's sources (deb822 or one-line format), else Debian's CDN. */
export function debianMirror(): string {
  const files = ["/etc/apt/sources.list"];
  try {
    for (const name of readdirSync("/etc/apt/sources.list.d"))
      files.push(join("/etc/apt/sources.list.d", name));
  } catch {}
  for (const file of files) {
    let text = "";
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const [, url] of text.matchAll(/^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+)/gm)) {
      if (url && /\/debian\/?$/.test(url)) return url;
    }
  }
  return "http://deb.debian.org/debian";
}
