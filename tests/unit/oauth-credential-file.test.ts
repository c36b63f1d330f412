// The credential file's rules (contract §5.8): private, bounded, bound to one server URL, expiry with
// the 60 s margin, and the status `repl-mcp doctor` reports.
import { afterEach, expect, test } from "bun:test";
import { chmodSync, mkdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ServerEntry } from "../../src/broker/config.ts";
import {
  type CredentialFile,
  ensureCredentialDirectory,
  needsRefresh,
  readCredentialFile,
  writeCredentialFile,
} from "../../src/broker/oauth/credential-file.ts";
import { credentialStatus } from "../../src/broker/oauth/status.ts";
import { tempDir } from "../support/harness.ts";

const URL_A = "http://127.0.0.1:9/mcp";
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function scratch(): string {
  const dir = tempDir("repl-mcp-oauth-unit-");
  dirs.push(dir);
  return dir;
}

const grant = (receivedAt: number, expiresIn = 3600): CredentialFile => ({
  server_url: URL_A,
  client: { client_id: "c1", issuer: "http://127.0.0.1:9/", token_endpoint: "http://127.0.0.1:9/token" },
  token_received_at: receivedAt,
  token_response: {
    access_token: "secret-access",
    token_type: "Bearer",
    expires_in: expiresIn,
    refresh_token: "secret-refresh",
  },
});

const entry = (credentialFile: string): ServerEntry => ({
  name: "web",
  scope: "config",
  allowedTools: undefined,
  secrets: [],
  transport: { type: "http", url: URL_A, headers: {}, oauth: { credentialFile } },
});

test("a written file is 0600, reads back, and is refused for another server URL", async () => {
  const path = join(scratch(), "web.json");
  await writeCredentialFile(path, grant(100));
  expect(statSync(path).mode & 0o777).toBe(0o600);
  expect(readCredentialFile(path, URL_A)?.token_response.access_token).toBe("secret-access");
  expect(() => readCredentialFile(path, "http://127.0.0.1:9/other")).toThrow(/different server URL/);
});

test("missing is null; wide mode, symlink, oversize and bad JSON are refused without values", async () => {
  const dir = scratch();
  expect(readCredentialFile(join(dir, "absent.json"), URL_A)).toBeNull();
  const wide = join(dir, "wide.json");
  await writeCredentialFile(wide, grant(100));
  chmodSync(wide, 0o644);
  expect(() => readCredentialFile(wide, URL_A)).toThrow(/group or others/);
  const link = join(dir, "link.json");
  symlinkSync(join(dir, "absent.json"), link);
  expect(() => readCredentialFile(link, URL_A)).toThrow(/symbolic link/);
  const big = join(dir, "big.json");
  writeFileSync(big, `"${"x".repeat(70_000)}"`, { mode: 0o600 });
  expect(() => readCredentialFile(big, URL_A)).toThrow(/exceeds 65536 bytes/);
  const broken = join(dir, "broken.json");
  writeFileSync(broken, '{"server_url": "secret-value"', { mode: 0o600 });
  const message = (() => {
    try {
      readCredentialFile(broken, URL_A);
    } catch (error) {
      return (error as Error).message;
    }
  })();
  expect(message).toMatch(/not valid JSON/);
  expect(message).not.toContain("secret");
});

test("a token within 60 s of its expiry needs a refresh; token_received_at 1 always does", () => {
  const now = 1_000_000;
  expect(needsRefresh(grant(now - 3000, 3600), now)).toBe(false);
  expect(needsRefresh(grant(now - 3541, 3600), now)).toBe(true);
  expect(needsRefresh(grant(1), now)).toBe(true);
});

test("the status names presence, mode, expiry and problems, never a token", async () => {
  const dir = scratch();
  const path = join(dir, "web.json");
  expect(credentialStatus(entry(path))).toMatchObject({ present: false, file: path });
  expect(credentialStatus(entry(path))?.problems[0]?.problem).toMatch(/Independent OAuth grant required/);
  await writeCredentialFile(path, grant(1, 3600));
  const status = credentialStatus(entry(path));
  expect(status).toMatchObject({ present: true, mode: "0600", expires_at: 3601, expired: true });
  expect(status?.refreshable).toBe(true);
  expect(status?.problems).toEqual([]);
  expect(JSON.stringify(status)).not.toContain("secret");
  chmodSync(path, 0o640);
  expect(credentialStatus(entry(path))?.problems[0]?.problem).toMatch(/group or others/);
});

test("the store directory is created 0700 and refused when others may enter it", () => {
  const dir = scratch();
  const nested = join(dir, "a", "b", "web.json");
  ensureCredentialDirectory(nested);
  expect(statSync(join(dir, "a", "b")).mode & 0o777).toBe(0o700);
  const open = join(dir, "open");
  mkdirSync(open, { mode: 0o755 });
  chmodSync(open, 0o755);
  expect(() => ensureCredentialDirectory(join(open, "web.json"))).toThrow(
    "OAuth store directory must have permissions 0700",
  );
});
