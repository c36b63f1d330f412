// No module of src/ or bench/ reaches itself through its imports (type-only imports count too): every
// folder reads top-down, with shared types and shapes below the modules that use them.
import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../..");

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return /\.tsx?$/.test(name) ? [path] : [];
  });
}

/** Every relative specifier a file imports or re-exports, statically or dynamically. */
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)["'](\.{1,2}\/[^"']+)["']/gm;

function importsOf(path: string): string[] {
  const text = readFileSync(path, "utf8");
  const found: string[] = [];
  for (const match of text.matchAll(SPECIFIER)) {
    const target = resolve(dirname(path), match[1] as string);
    if (/\.tsx?$/.test(target) && existsSync(target)) found.push(target);
  }
  return found;
}

/** The strongly connected components of more than one file (Tarjan), or a file that imports itself. */
function circles(paths: string[]): string[][] {
  const graph = new Map(paths.map((path) => [path, importsOf(path).filter((to) => paths.includes(to))]));
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (node: string) => {
    index.set(node, next);
    low.set(node, next);
    next++;
    stack.push(node);
    onStack.add(node);
    for (const to of graph.get(node) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node) as number, low.get(to) as number));
      } else if (onStack.has(to)) {
        low.set(node, Math.min(low.get(node) as number, index.get(to) as number));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop() as string;
      onStack.delete(member);
      component.push(relative(ROOT, member));
    } while (member !== node);
    if (component.length > 1 || graph.get(node)?.includes(node)) found.push(component.sort());
  };
  for (const path of paths) if (!index.has(path)) visit(path);
  return found;
}

test("the import graph of src/ and bench/ has no circles", () => {
  const paths = [...files(join(ROOT, "src")), ...files(join(ROOT, "bench"))];
  expect(paths.length).toBeGreaterThan(100);
  expect(circles(paths)).toEqual([]);
});

test("the check finds a circle when there is one", () => {
  // The detector itself must be able to fail: two fixture files that import each other.
  const dir = join(ROOT, "tests/fixtures/circles");
  const found = circles(files(dir));
  expect(found).toEqual([["tests/fixtures/circles/a.ts", "tests/fixtures/circles/b.ts"]]);
});
