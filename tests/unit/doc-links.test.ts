// The README is a front page that sends readers to docs/; a page moved or a heading renamed must not leave
// a link pointing at nothing. Every relative link in README.md and docs/*.md must name a file that exists,
// and its #anchor a heading of that file (as GitHub renders the anchor).
import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../..");
const PAGES = [
  join(ROOT, "README.md"),
  ...readdirSync(join(ROOT, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => join(ROOT, "docs", name)),
];

/** The page's prose: fenced code blocks and inline code spans hold examples, not links. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, "").replace(/`[^`\n]*`/g, "");
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  const withoutFences = markdown.replace(/^```[\s\S]*?^```/gm, "");
  for (const [, heading] of withoutFences.matchAll(/^#{1,6} +(.+?) *#* *$/gm)) {
    const base = (heading ?? "")
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
      .replace(/ /g, "-");
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

function links(markdown: string): string[] {
  return [...prose(markdown).matchAll(/\]\(([^)\s]+)(?: "[^"]*")?\)/g)].map((match) => match[1] ?? "");
}

const isExternal = (target: string) => /^[a-z][a-z0-9+.-]*:/i.test(target);

test("every relative link and anchor in README.md and docs/ resolves", () => {
  const broken: string[] = [];
  let checked = 0;
  for (const page of PAGES) {
    const text = readFileSync(page, "utf8");
    for (const target of links(text)) {
      if (isExternal(target)) continue;
      checked += 1;
      const [path = "", anchor] = target.split("#", 2);
      const file = path === "" ? page : resolve(dirname(page), decodeURIComponent(path));
      const where = `${relative(ROOT, page)}: (${target})`;
      if (!existsSync(file)) {
        broken.push(`${where} names a missing file`);
        continue;
      }
      if (anchor !== undefined && anchor !== "") {
        if (!file.endsWith(".md") || statSync(file).isDirectory()) {
          broken.push(`${where} has an anchor into something that is not a Markdown page`);
        } else if (!anchors(readFileSync(file, "utf8")).has(anchor)) {
          broken.push(`${where} names no heading of ${relative(ROOT, file)}`);
        }
      }
    }
  }
  expect(broken).toEqual([]);
  // The pages link to each other: a parser that found no links would pass vacuously.
  expect(checked).toBeGreaterThan(30);
});

test("every page of docs/ is linked from the README", () => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const linked = new Set(
    links(readme)
      .filter((target) => !isExternal(target))
      .map((target) => resolve(ROOT, target.split("#")[0] ?? "")),
  );
  expect(PAGES.slice(1).filter((page) => !linked.has(page))).toEqual([]);
});

test("anchors are computed as GitHub computes them", () => {
  const page =
    "# A journal that survives a crash: `--journal PATH`\n## Sessions: `_list`, `_close`\n## Notes\n## Notes\n";
  expect([...anchors(page)]).toEqual([
    "a-journal-that-survives-a-crash---journal-path",
    "sessions-_list-_close",
    "notes",
    "notes-1",
  ]);
});
