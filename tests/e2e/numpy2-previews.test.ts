// numpy 2's variable-width strings (StringDType, dtype kind "T") in a cell's preview, through a Debian 13
// python3 with numpy 2 (tests/support/numpy2.ts): Debian 12's numpy 1.24 has no such dtype.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Harness } from "../support/harness.ts";
import { numpy2Python, numpy2Unavailable } from "../support/numpy2.ts";

const reason = numpy2Unavailable();
if (reason) console.warn(`skipping the numpy 2 preview tests: ${reason}`);
const real = test.skipIf(reason !== undefined);

let h: Harness | undefined;
beforeAll(async () => {
  if (reason) return;
  h = await Harness.start({ args: ["--python", await numpy2Python()] });
}, 900_000);
afterAll(async () => {
  await h?.close();
});

real("StringDType arrays show their strings, cut like any other cell", async () => {
  const harness = h as Harness;
  const version = await harness.run("import numpy as np\nnp.__version__");
  expect(String(version.value)).toMatch(/^2\./);
  const words = "['Oslo', 'x' * 100, 'é\\nz']";
  const strings = await harness.run(`np.array(${words}, dtype=np.dtypes.StringDType())`);
  expect(strings.success).toBe(true);
  const long = `"${"x".repeat(38)}…`;
  expect(strings.return_value).toBe(
    `numpy.ndarray shape=(3,) dtype=StringDType()\n["Oslo", ${long}, "é\\nz"]`,
  );
  // Exactly what the same strings show as numpy's fixed-width unicode, but for the dtype.
  const fixed = await harness.run(`np.array(${words})`);
  expect(fixed.return_value).toBe(String(strings.return_value).replace("StringDType()", "<U100"));
  expect(strings.value_info).toEqual({ type: "numpy.ndarray", shape: [3], dtype: "StringDType()" });
  expect(strings.truncated.return).toBe(true);
});

real("a missing value is shown as itself, and the missing-value object's repr() never runs", async () => {
  const harness = h as Harness;
  const withNone = await harness.run(
    "np.array(['a', None, 'c'], dtype=np.dtypes.StringDType(na_object=None))",
  );
  expect(withNone.return_value).toBe(
    'numpy.ndarray shape=(3,) dtype=StringDType(na_object=None)\n["a", None, "c"]',
  );
  await harness.run(
    [
      "class Missing:",
      "    calls = 0",
      "    def __repr__(self):",
      "        Missing.calls += 1",
      "        return 'missing'",
      "    __str__ = __repr__",
      "gap = Missing()",
      "odd = np.array(['a'], dtype=np.dtypes.StringDType(na_object=gap))",
      "before = Missing.calls",
    ].join("\n"),
  );
  const odd = await harness.run("odd");
  expect(odd.return_value).toBe('numpy.ndarray shape=(1,) dtype=StringDType(na_object=<Missing>)\n["a"]');
  expect((await harness.run("Missing.calls - before")).value).toBe(0);
});
