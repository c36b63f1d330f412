// The HTTP guard's decisions, request by request: Host and Origin allow lists, then the bearer token.
import { expect, test } from "bun:test";
import { Guard } from "../../src/server/http/guard.ts";
import { chooseToken, isLoopback, StartupError } from "../../src/server/http/token.ts";

const TOKEN = "0123456789abcdef-token";

function status(guard: Guard, headers: Record<string, string>): number {
  const request = new Request("http://127.0.0.1:1/mcp", { method: "POST", headers });
  return guard.check(request)?.status ?? 200;
}

test("Host: loopback names, the bound address and --allowed-host pass; others are refused", () => {
  const guard = new Guard({
    bindHost: "10.1.2.3",
    allowedHosts: ["repl.example"],
    allowedOrigins: [],
    token: TOKEN,
  });
  const auth = { authorization: `Bearer ${TOKEN}` };
  for (const host of ["localhost:8765", "127.0.0.1", "[::1]:9", "10.1.2.3:8765", "REPL.example:443"]) {
    expect(status(guard, { ...auth, host })).toBe(200);
  }
  for (const host of ["evil.example", "127.0.0.1.evil.example", "", "user@localhost", "10.1.2.4"]) {
    expect(status(guard, { ...auth, host })).toBe(403);
  }
  const wildcard = new Guard({ bindHost: "0.0.0.0", allowedHosts: [], allowedOrigins: [], token: TOKEN });
  expect(status(wildcard, { ...auth, host: "0.0.0.0:8765" })).toBe(403);
  const any = new Guard({ bindHost: "0.0.0.0", allowedHosts: ["*"], allowedOrigins: [], token: TOKEN });
  expect(status(any, { ...auth, host: "anything.example" })).toBe(200);
});

test("Origin: absent, loopback or listed passes; anything else, null included, is refused", () => {
  const guard = new Guard({
    bindHost: "127.0.0.1",
    allowedHosts: [],
    allowedOrigins: ["https://app.example/"],
    token: undefined,
  });
  const host = "127.0.0.1:8765";
  expect(status(guard, { host })).toBe(200);
  for (const origin of [
    "http://localhost:6274",
    "https://127.0.0.1",
    "http://[::1]:3000",
    "https://app.example",
  ]) {
    expect(status(guard, { host, origin })).toBe(200);
  }
  for (const origin of ["https://evil.example", "null", "http://app.example", "file://x", "nonsense"]) {
    expect(status(guard, { host, origin })).toBe(403);
  }
});

test("token: only the exact bearer token passes", () => {
  const guard = new Guard({ bindHost: "127.0.0.1", allowedHosts: [], allowedOrigins: [], token: TOKEN });
  const host = "localhost";
  expect(status(guard, { host, authorization: `Bearer ${TOKEN}` })).toBe(200);
  expect(status(guard, { host, authorization: `bearer ${TOKEN}` })).toBe(200);
  for (const authorization of [
    "",
    TOKEN,
    `Bearer ${TOKEN}x`,
    `Bearer ${TOKEN.slice(1)}`,
    `Basic ${TOKEN}`,
    "Bearer",
  ]) {
    expect(status(guard, { host, authorization })).toBe(401);
  }
  expect(status(guard, { host })).toBe(401);
  // Host is checked first: a foreign page learns nothing about the token.
  expect(status(guard, { host: "evil.example" })).toBe(403);
});

test("loopback binds and token rules", () => {
  for (const host of ["127.0.0.1", "127.9.0.1", "localhost", "::1", "[::1]"])
    expect(isLoopback(host)).toBe(true);
  for (const host of ["0.0.0.0", "::", "10.0.0.1", "example.com", "127.0.0.1.example"])
    expect(isLoopback(host)).toBe(false);
  const loopback = { host: "127.0.0.1", authTokenFile: undefined, noAuth: false };
  expect(chooseToken(loopback, TOKEN)).toEqual({ token: TOKEN, generated: false });
  expect(() => chooseToken(loopback, "")).toThrow("set but empty");
  expect(() => chooseToken(loopback, "short")).toThrow(StartupError);
  expect(() => chooseToken(loopback, "has a space in it, sixteen+")).toThrow("printable ASCII");
  // Nothing given: a fresh token on loopback, none elsewhere (the server then refuses to start).
  const made = chooseToken(loopback, undefined);
  expect(made.generated).toBe(true);
  expect(made.token).toMatch(/^[0-9a-f]{64}$/);
  expect(chooseToken(loopback, undefined).token).not.toBe(made.token);
  expect(chooseToken({ ...loopback, host: "0.0.0.0" }, undefined)).toEqual({
    token: undefined,
    generated: false,
  });
  expect(chooseToken({ ...loopback, noAuth: true }, undefined)).toEqual({
    token: undefined,
    generated: false,
  });
  expect(() => chooseToken({ ...loopback, host: "::", noAuth: true }, undefined)).toThrow("loopback --host");
});
