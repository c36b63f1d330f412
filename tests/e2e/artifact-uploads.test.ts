// How a cell's value reaches the artifact store: appends kept in flight (a window, not one round trip
// each), and large values written into an unnamed file the server adopts, with every check the
// handover makes and the limits it keeps. Real binary, real python3.
import { afterAll, afterEach, beforeAll, beforeEach, expect, test } from "bun:test";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { Harness, SessionClient, tempDir } from "../support/harness.ts";

// One server for the file, with a temp directory of its own (its workers inherit it), emptied before each
// test, so a test sees every file left there; each test runs in a session of its own.
let server: Harness;
let tmp: string;
let h: SessionClient;
beforeAll(async () => {
  tmp = tempDir("repl-mcp-uploads-");
  server = await Harness.start({ env: { TMPDIR: tmp } });
});
afterAll(async () => {
  await server?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});
beforeEach(async () => {
  for (const name of readdirSync(tmp)) rmSync(join(tmp, name), { recursive: true, force: true });
  h = await SessionClient.open(server);
});
afterEach(async () => {
  await h?.close();
});

/** Python: from here on, every bridge request frame is logged in `log` as "post <what>", and every
 * answer the worker takes from its requests as "answer <what>" (<what>: the op, and the chunk index
 * of an append). */
const LOG_FRAMES = [
  "import sys",
  "w = sys.modules['__main__']",
  "log, labels = [], {}",
  "real_post, real_unwrap = w._BRIDGE._post, w._unwrap",
  "def post(pending, op, params):",
  "    what = op.split('.')[1]",
  "    if what == 'append':",
  "        what += ' %d' % (params['offset'] // 32768)",
  "    labels[pending.id] = what",
  "    log.append('post ' + what)",
  "    return real_post(pending, op, params)",
  "def unwrap(pending):",
  "    log.append('answer ' + labels.get(pending.id, '?'))",
  "    return real_unwrap(pending)",
  "w._BRIDGE._post, w._unwrap = post, unwrap",
].join("\n");

test("appends in frames keep eight in flight: the worker waits for the oldest only when nine are out", async () => {
  const out = await h.run(
    [
      LOG_FRAMES,
      "import hashlib, os",
      "w.ARTIFACT_HANDOVER_MIN_BYTES = 1 << 40  # this test is about the frames",
      "data = os.urandom(12 * 32768)",
      "ref = artifact(data)",
      "{'log': log, 'same': ref['sha256'] == hashlib.sha256(data).hexdigest() and ref['size'] == len(data)}",
    ].join("\n"),
  );
  const appends = (from: number, to: number, kind: string) =>
    Array.from({ length: to - from }, (_, i) => `${kind} append ${from + i}`);
  expect(out.value).toEqual({
    same: true,
    log: [
      "post begin",
      "answer begin",
      ...appends(0, 9, "post"),
      ...[9, 10, 11].flatMap((i) => [`answer append ${i - 9}`, `post append ${i}`]),
      ...appends(3, 12, "answer"),
      "post commit",
      "answer commit",
    ],
  });
}, 30_000);

test("16 MiB go through an unnamed file the server adopts; nothing is left anywhere", async () => {
  const out = await h.run(
    [
      "import hashlib, os, sys",
      "w = sys.modules['__main__']",
      "params = []",
      "real_post = w._BRIDGE._post",
      "def keep(pending, op, p):",
      "    params.append(' '.join(sorted(p)))",
      "    return real_post(pending, op, p)",
      "w._BRIDGE._post = keep",
      "data = os.urandom(16 << 20)",
      "ref = artifact(data)",
      "w._BRIDGE._post = real_post",
      "unnamed = []",
      "for f in os.listdir('/proc/self/fd'):",
      "    try:",
      "        link = os.readlink('/proc/self/fd/' + f)",
      "    except OSError:",
      "        continue  # the descriptor listdir() itself used",
      "    if '(deleted)' in link:",
      "        unnamed.append(link)",
      "{'ref': ref, 'sha': hashlib.sha256(data).hexdigest(), 'params': params, 'unnamed': unnamed}",
    ].join("\n"),
  );
  const value = out.value as Record<string, any>;
  expect(value.ref).toMatchObject({ size: 16 << 20, format: "binary", sha256: value.sha });
  // One begin handing over the descriptor, sixteen appends of 1 MiB that carry sizes, one commit.
  expect(value.params).toEqual(["fd format", ...Array(16).fill("offset size upload_id"), "upload_id"]);
  expect(value.unnamed).toEqual([]);
  const path = join(h.project, "copy.bin");
  const saved = await h.call("artifact_save", {
    session_id: out.session_id,
    id: value.ref.id,
    path,
  });
  expect(saved.isError).toBe(false);
  expect(new Bun.CryptoHasher("sha256").update(readFileSync(path)).digest("hex")).toBe(value.sha);
  expect(readdirSync(tmp)).toEqual([]);
}, 60_000);

test("the server adopts only an empty, unnamed, private regular file of this user", async () => {
  const out = await h.run(
    [
      "import os, sys",
      "w = sys.modules['__main__']",
      "tmp = os.environ['TMPDIR']",
      "def begin(fd):",
      "    try:",
      "        w._BRIDGE.request('artifact.begin', {'format': 'binary', 'fd': fd}, 5)",
      "        return 'accepted'",
      "    except Exception as e:",
      "        return str(e)",
      "def unnamed(mode=0o600, content=b''):",
      "    fd = os.open(tmp, os.O_TMPFILE | os.O_RDWR, mode)",
      "    os.write(fd, content)",
      "    return fd",
      "named = os.open(os.path.join(tmp, 'named'), os.O_CREAT | os.O_RDWR, 0o600)",
      "pipe_r, pipe_w = os.pipe()",
      "cases = {",
      "    'named': begin(named),",
      "    'not empty': begin(unnamed(content=b'x')),",
      "    'readable by others': begin(unnamed(mode=0o644)),",
      "    'a pipe': begin(pipe_r),",
      "    'not open': begin(999),",
      "    'fine': begin(unnamed()),",
      "}",
      "os.unlink(os.path.join(tmp, 'named'))",
      "# A refused handover costs nothing: the value goes as chunks instead.",
      "w._handover_file = lambda: os.open(tmp, os.O_TMPFILE | os.O_RDWR, 0o644)",
      "data = os.urandom(300_000)",
      "ref = artifact(data)",
      "import hashlib",
      "cases['fell back'] = ref['sha256'] == hashlib.sha256(data).hexdigest()",
      "cases",
    ].join("\n"),
  );
  const refused = expect.stringContaining("Artifact file handover refused");
  expect(out.value).toEqual({
    named: refused,
    "not empty": refused,
    "readable by others": refused,
    "a pipe": refused,
    "not open": refused,
    fine: "accepted",
    "fell back": true,
  });
}, 30_000);

test("a full temp directory costs nothing either: the value goes as chunks", async () => {
  const out = await h.run(
    [
      "import errno, hashlib, os",
      "real = os.pwrite",
      "def full(fd, data, offset):",
      "    raise OSError(errno.ENOSPC, 'No space left on device')",
      "os.pwrite = full",
      "try:",
      "    data = os.urandom(300_000)",
      "    ref = artifact(data)",
      "finally:",
      "    os.pwrite = real",
      "(ref['size'], ref['sha256'] == hashlib.sha256(data).hexdigest())",
    ].join("\n"),
  );
  expect(out.success, JSON.stringify(out.error)).toBe(true);
  expect(out.value).toEqual([300_000, true]);
});

test("a handed-over upload keeps every limit: sizes, offsets, 16 MiB, and exactly the bytes appended", async () => {
  const out = await h.run(
    [
      "import os, sys",
      "w = sys.modules['__main__']",
      "tmp = os.environ['TMPDIR']",
      "request = w._BRIDGE.request",
      "def attempt(op, params):",
      "    try:",
      "        request(op, params, 5)",
      "        return 'ok'",
      "    except Exception as e:",
      "        return str(e)",
      "def handed(content):",
      "    fd = os.open(tmp, os.O_TMPFILE | os.O_RDWR, 0o600)",
      "    upload = request('artifact.begin', {'format': 'binary', 'fd': fd}, 5)['upload_id']",
      "    os.pwrite(fd, content, 0)",
      "    return fd, upload",
      "fd, up = handed(b'y' * (2 << 20))",
      "chunked = request('artifact.begin', {'format': 'binary'}, 5)['upload_id']",
      "r = {",
      "    'size on a chunked upload': attempt('artifact.append', {'upload_id': chunked, 'offset': 0, 'size': 10}),",
      "    'data on a handed-over one': attempt('artifact.append', {'upload_id': up, 'offset': 0, 'data': 'eHl6'}),",
      "    'piece over 1 MiB': attempt('artifact.append', {'upload_id': up, 'offset': 0, 'size': (1 << 20) + 1}),",
      "    'first MiB': attempt('artifact.append', {'upload_id': up, 'offset': 0, 'size': 1 << 20}),",
      "    'replayed': attempt('artifact.append', {'upload_id': up, 'offset': 0, 'size': 1 << 20}),",
      "    'commit with a MiB more in the file': attempt('artifact.commit', {'upload_id': up}),",
      "}",
      "os.close(fd)",
      "fd, up = handed(b'z' * 100)",
      "r['piece past the end of the file'] = attempt('artifact.append', {'upload_id': up, 'offset': 0, 'size': 200})",
      "os.close(fd)",
      "fd, up = handed(b'q' * ((16 << 20) + 1))",
      "for i in range(16):",
      "    request('artifact.append', {'upload_id': up, 'offset': i << 20, 'size': 1 << 20}, 5)",
      "r['past 16 MiB'] = attempt('artifact.append', {'upload_id': up, 'offset': 16 << 20, 'size': 1})",
      "os.close(fd)",
      "r",
    ].join("\n"),
  );
  expect(out.value).toEqual({
    "size on a chunked upload": expect.stringContaining("Artifact upload piece must be 1..1048576 bytes"),
    "data on a handed-over one": expect.stringContaining("Artifact upload chunk must be base64"),
    "piece over 1 MiB": expect.stringContaining("Artifact upload piece must be 1..1048576 bytes"),
    "first MiB": "ok",
    replayed: "Artifact upload offset mismatch; do not replay an append",
    "commit with a MiB more in the file": expect.stringContaining(
      "Artifact handover file does not hold exactly the bytes appended",
    ),
    "piece past the end of the file": expect.stringContaining(
      "Artifact handover file does not hold exactly the bytes appended",
    ),
    "past 16 MiB": "Artifact exceeds 16 MiB",
  });
}, 60_000);

test("a worker that dies in the middle of a handed-over upload leaves no file and no upload", async () => {
  const crashed = await h.run(
    [
      "import os",
      "real = os.pwrite",
      "written = []",
      "def pwrite(fd, data, offset):",
      "    if len(written) == 3:",
      "        os._exit(9)",
      "    written.append(offset)",
      "    return real(fd, data, offset)",
      "os.pwrite = pwrite",
      "artifact(os.urandom(8 << 20))",
    ].join("\n"),
  );
  expect(crashed).toMatchObject({ success: false, state: "cleared" });
  expect(readdirSync(tmp)).toEqual([]);
  // Its upload was dropped with the run: all four slots are free again.
  const slots = await h.run(
    "import sys\n[sys.modules['__main__']._BRIDGE.request('artifact.begin', {'format': 'text'}, 5)['max_bytes'] for _ in range(4)]",
  );
  expect(slots.value).toEqual(Array(4).fill(16 << 20));
}, 30_000);
