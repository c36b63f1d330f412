// The published install.sh: release/install.sh with the shared download-and-verify code of the plugin's
// launcher (release/plugin/scripts/fetch-release.sh) written in place of the line that sources it, so
// that `curl ... | sh` runs one self-contained file while the repository keeps one copy of that code.
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

const root = resolve(dirname(new URL(import.meta.url).pathname), "..");

export const INSTALLER_SOURCE = join(root, "release", "install.sh");
export const SHARED_FETCH_SOURCE = join(root, "release", "plugin", "scripts", "fetch-release.sh");

/** The one line of release/install.sh that reads the shared code from a checkout. */
export const SHARED_FETCH_LINE = '. "$(dirname -- "$0")/plugin/scripts/fetch-release.sh"';

export function publishedInstaller(): string {
  const installer = readFileSync(INSTALLER_SOURCE, "utf8");
  const lines = installer.split("\n");
  const at = lines.indexOf(SHARED_FETCH_LINE);
  if (at < 0 || lines.indexOf(SHARED_FETCH_LINE, at + 1) >= 0) {
    throw new Error(`${INSTALLER_SOURCE} must contain the line ${SHARED_FETCH_LINE} exactly once`);
  }
  const shared = readFileSync(SHARED_FETCH_SOURCE, "utf8").trimEnd();
  lines.splice(
    at,
    1,
    `# --- ${"shared with the plugin's launcher (fetch-release.sh) ".padEnd(94, "-")}`,
    "",
    shared,
  );
  return lines.join("\n");
}
