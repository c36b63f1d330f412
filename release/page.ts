// Build-time only: bundles the viewer's page (src/viewer/page/) into the strings the binary embeds. It
// runs as a Bun macro (src/viewer/assets.ts imports it `with { type: "macro" }`), so the page is built
// whenever the server's code is, by the same Bun, and nothing of it is read from disk at run time.
// A macro may not call Bun.build (the bundler is busy running it), so the CLI is run instead.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";

const PAGE = resolve(import.meta.dir, "../src/viewer/page");

export function pageScript(): string {
  const built = Bun.spawnSync(
    [process.execPath, "build", join(PAGE, "page.ts"), "--target=browser", "--format=iife", "--minify"],
    { stderr: "pipe" },
  );
  if (built.exitCode !== 0) throw new Error(`the viewer page did not build:\n${built.stderr.toString()}`);
  return built.stdout.toString();
}

export function pageFile(name: "index.html" | "page.css"): string {
  return readFileSync(join(PAGE, name), "utf8");
}
