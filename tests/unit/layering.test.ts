// Keeps the layering of ../shared/design.md true: each third-party library has one home, and lower
// layers never import upper ones.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";

const SRC = resolve(import.meta.dir, "../../src");

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : path.endsWith(".ts") ? [path] : [];
  });
}

const sources = files(SRC).map((path) => ({ path: relative(SRC, path), text: readFileSync(path, "utf8") }));

function offenders(pattern: RegExp, allowed: (path: string) => boolean): string[] {
  return sources.filter(({ path, text }) => pattern.test(text) && !allowed(path)).map(({ path }) => path);
}

test("each third-party library is imported in one place", () => {
  expect(offenders(/Bun\.spawn/, (p) => p.startsWith("guardian/"))).toEqual([]);
  expect(offenders(/from "citty"/, (p) => p.startsWith("cli/"))).toEqual([]);
  expect(offenders(/from "consola/, (p) => p === "log.ts")).toEqual([]);
  // The SDK's 2.x packages, static or dynamic imports alike: the client is the broker's, the server the
  // server's, and the raw schemas of core are for parsing on the wire.
  expect(offenders(/["']@modelcontextprotocol\/client/, (p) => p.startsWith("broker/"))).toEqual([]);
  expect(offenders(/["']@modelcontextprotocol\/server/, (p) => p.startsWith("server/"))).toEqual([]);
  expect(offenders(/["']@modelcontextprotocol\/core/, (p) => p.startsWith("wire/"))).toEqual([]);
  expect(offenders(/["']@modelcontextprotocol\/sdk/, () => false)).toEqual([]);
  expect(offenders(/["']@jupyterlab\//, (p) => p === "kernels/jupyter.ts")).toEqual([]);
  // The sandbox runtime, and the helper programs it ships: src/sandbox/ alone.
  expect(offenders(/["']@anthropic-ai\/sandbox-runtime/, (p) => p.startsWith("sandbox/"))).toEqual([]);
});

test("lower layers never import upper ones", () => {
  const upper = /from "\.\.\/(server|sessions|broker|cli)\//;
  for (const layer of ["wire/", "guardian/", "worker/", "text/", "fs/", "person/", "sandbox/"]) {
    expect(offenders(upper, (p) => !p.startsWith(layer))).toEqual([]);
  }
  expect(offenders(/from "\.\.\/(server|sessions)\//, (p) => !p.startsWith("broker/"))).toEqual([]);
});
