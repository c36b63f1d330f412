// The deterministic archive writer and checksum file used by the release build, checked against the
// system's tar and sha256sum so that users' tools read what we write.
import { afterEach, expect, test } from "bun:test";
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  checksumFile,
  gzipDeterministic,
  packExecutable,
  sha256Hex,
  tarArchive,
  tarHeader,
} from "../../release/archive.ts";
import { parseTargets, RELEASE_TARGETS } from "../../release/release.ts";
import { listDir, makeTempDir, removeTree, run } from "./support.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) removeTree(dir);
});

function tempDir(): string {
  const dir = makeTempDir("repl-mcp-archive-");
  dirs.push(dir);
  return dir;
}

const bytes = (length: number, seed = 7) => Uint8Array.from({ length }, (_, i) => (i * 31 + seed) & 0xff);

test("the ustar header carries the name, 0755, owner 0/0, size, mtime and a valid checksum", () => {
  const header = tarHeader({ name: "repl-mcp", data: bytes(1234), mode: 0o755, mtime: 1_700_000_000 });
  expect(header).toHaveLength(512);
  const text = (offset: number, length: number) =>
    new TextDecoder().decode(header.subarray(offset, offset + length)).replace(/\0.*$/s, "");
  expect(text(0, 100)).toBe("repl-mcp");
  expect(text(100, 8)).toBe("0000755");
  expect(text(108, 8)).toBe("0000000");
  expect(text(116, 8)).toBe("0000000");
  expect(Number.parseInt(text(124, 12), 8)).toBe(1234);
  expect(Number.parseInt(text(136, 12), 8)).toBe(1_700_000_000);
  expect(text(156, 1)).toBe("0");
  expect(text(257, 6)).toBe("ustar");
  expect(text(263, 2)).toBe("00");
  const stored = Number.parseInt(text(148, 8), 8);
  const copy = new Uint8Array(header);
  copy.fill(0x20, 148, 156);
  expect(copy.reduce((sum, byte) => sum + byte, 0)).toBe(stored);
});

test("archives are padded to whole blocks and records and end with two zero blocks", () => {
  for (const size of [0, 1, 511, 512, 513, 10_240, 20_000]) {
    const tar = tarArchive([{ name: "f", data: bytes(size), mode: 0o644, mtime: 0 }]);
    expect(tar.length % 10_240).toBe(0);
    const end = 512 + Math.ceil(size / 512) * 512;
    expect(tar.length).toBeGreaterThanOrEqual(end + 1024);
    expect(tar.subarray(end).every((byte) => byte === 0)).toBe(true);
    expect([...tar.subarray(512, 512 + size)]).toEqual([...bytes(size)]);
  }
  expect(() => tarHeader({ name: "x".repeat(101), data: bytes(1), mode: 0o644, mtime: 0 })).toThrow();
  expect(() => tarHeader({ name: "", data: bytes(1), mode: 0o644, mtime: 0 })).toThrow();
});

test("packing is deterministic and the gzip header has no timestamp", async () => {
  const data = bytes(100_000);
  const first = await packExecutable("repl-mcp", data);
  const second = await packExecutable("repl-mcp", new Uint8Array(data));
  expect(sha256Hex(first)).toBe(sha256Hex(second));
  expect([...first.subarray(0, 3)]).toEqual([0x1f, 0x8b, 8]);
  expect([...first.subarray(4, 8)]).toEqual([0, 0, 0, 0]);
  expect(first[9]).toBe(3);
  expect(sha256Hex(await packExecutable("repl-mcp", bytes(100_000, 8)))).not.toBe(sha256Hex(first));
  expect([...Bun.gunzipSync(await gzipDeterministic(data))]).toEqual([...data]);
});

test("the system tar extracts exactly one executable named repl-mcp with the original bytes", async () => {
  const dir = tempDir();
  const data = new TextEncoder().encode("#!/bin/sh\necho packed-ok\n");
  writeFileSync(join(dir, "a.tar.gz"), await packExecutable("repl-mcp", data));
  const listing = await run(["tar", "-tzf", "a.tar.gz"], { cwd: dir });
  expect(listing.code).toBe(0);
  expect(listing.stdout).toBe("repl-mcp\n");
  mkdirSync(join(dir, "out"));
  const extract = await run(["tar", "-xzf", "a.tar.gz", "-C", "out"], { cwd: dir });
  expect(extract.stderr).toBe("");
  expect(extract.code).toBe(0);
  expect(listDir(join(dir, "out"))).toEqual(["repl-mcp"]);
  expect(readFileSync(join(dir, "out", "repl-mcp"))).toEqual(Buffer.from(data));
  expect(statSync(join(dir, "out", "repl-mcp")).mode & 0o777).toBe(0o755);
  const ran = await run([join(dir, "out", "repl-mcp")]);
  expect(ran.stdout).toBe("packed-ok\n");
});

test("SHA256SUMS is sorted, in sha256sum format, and accepted by sha256sum -c", async () => {
  const dir = tempDir();
  const files = { "b.tar.gz": bytes(10), a: bytes(20), "a.tar.gz": bytes(30) };
  for (const [name, data] of Object.entries(files)) writeFileSync(join(dir, name), data);
  const text = checksumFile(Object.entries(files).map(([name, data]) => ({ name, sha256: sha256Hex(data) })));
  expect(text.split("\n").map((line) => line.slice(66))).toEqual(["a", "a.tar.gz", "b.tar.gz", ""]);
  expect(text).toMatch(/^([0-9a-f]{64} {2}\S+\n)+$/);
  expect(sha256Hex(new TextEncoder().encode("abc"))).toBe(
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
  );
  if (!Bun.which("sha256sum")) return;
  writeFileSync(join(dir, "SHA256SUMS"), text);
  const ok = await run(["sha256sum", "-c", "SHA256SUMS"], { cwd: dir });
  expect(ok.code).toBe(0);
  writeFileSync(join(dir, "a"), bytes(21));
  const bad = await run(["sha256sum", "-c", "SHA256SUMS"], { cwd: dir });
  expect(bad.code).not.toBe(0);
});

test("--targets accepts a subset in any order and rejects unknown names", () => {
  expect(parseTargets("darwin-arm64, linux-x64,linux-x64")).toEqual(["linux-x64", "darwin-arm64"]);
  expect(parseTargets(RELEASE_TARGETS.join(","))).toEqual([...RELEASE_TARGETS]);
  expect(() => parseTargets("linux-x64,windows-x64")).toThrow(/unknown target "windows-x64"/);
  expect(() => parseTargets(" , ")).toThrow(/at least one target/);
});
