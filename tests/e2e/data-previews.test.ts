// Previews of numpy and pandas values through the system interpreter that has them (CI installs
// Debian's python3-numpy and python3-pandas). Without them these tests skip and say why. polars is
// not installable here: its code path is exercised with a stand-in module that is NOT polars.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Harness } from "../support/harness.ts";

const SYSTEM_PYTHON = "/usr/bin/python3";

function missing(): string | undefined {
  try {
    const probe = Bun.spawnSync([SYSTEM_PYTHON, "-c", "import numpy, pandas"], { stderr: "pipe" });
    if (probe.exitCode === 0) return undefined;
    return `${SYSTEM_PYTHON} cannot import numpy and pandas (install python3-numpy and python3-pandas)`;
  } catch {
    return `${SYSTEM_PYTHON} does not exist`;
  }
}

const reason = missing();
if (reason) console.warn(`skipping numpy/pandas preview tests: ${reason}`);
const real = test.skipIf(reason !== undefined);

let h: Harness;
beforeAll(async () => {
  if (reason) return;
  h = await Harness.start({ args: ["--python", SYSTEM_PYTHON] });
  // Listing makes the SDK client check every later structuredContent against the published schemas.
  await h.client.listTools();
});
afterAll(async () => {
  if (!reason) await h.close();
});

/** A class whose every way of becoming text is counted and printed: none of them may run. */
const LOUD = [
  "class Loud:",
  "    calls = 0",
  "    def __repr__(self):",
  "        Loud.calls += 1",
  "        print('repr ran')",
  "        return 'loud'",
  "    __str__ = __repr__",
  "    def __format__(self, spec):",
  "        Loud.calls += 1",
  "        return 'loud'",
].join("\n");

real("execute_python publishes value_info in its output schema", async () => {
  const { tools } = await h.client.listTools();
  const schema = tools.find((tool) => tool.name === "execute_python")?.outputSchema as any;
  const info = schema.properties.value_info;
  expect(info.required).toEqual(["type", "shape"]);
  expect(Object.keys(info.properties).sort()).toEqual(
    ["columns", "columns_truncated", "dtype", "dtypes", "shape", "type"].sort(),
  );
  expect(info.properties.columns.maxItems).toBe(50);
});

real("a DataFrame comes back as a table with its shape, dtypes and columns", async () => {
  const result = await h.run(
    "import pandas as pd, numpy as np\ndf = pd.DataFrame({'city': ['Oslo', 'Lima', 'Pune'], 'temp': [3.5, 19.2, 28.1]}); df",
  );
  expect(result.success).toBe(true);
  expect(result.return_value).toBe(
    [
      "pandas.DataFrame 3 rows × 2 columns",
      "   city  temp",
      "0  Oslo   3.5",
      "1  Lima  19.2",
      "2  Pune  28.1",
      "dtypes: city object, temp float64",
    ].join("\n"),
  );
  expect(result.value_info).toEqual({
    type: "pandas.DataFrame",
    shape: [3, 2],
    dtypes: { city: "object", temp: "float64" },
    columns: ["city", "temp"],
    columns_truncated: false,
  });
  expect(result.truncated.return).toBe(false);
  expect(result.value).toBeUndefined();
});

real("arrays, numpy scalars, series and indexes", async () => {
  const array = await h.run("np.arange(12).reshape(3, 4)");
  expect(array.return_value).toBe(
    "numpy.ndarray shape=(3, 4) dtype=int64\n[[0, 1, 2, 3],\n [4, 5, 6, 7],\n [8, 9, 10, 11]]",
  );
  expect(array.value_info).toEqual({ type: "numpy.ndarray", shape: [3, 4], dtype: "int64" });

  const scalar = await h.run("np.float32(19.2)");
  expect(scalar.return_value).toBe("numpy.float32 19.2");
  expect(scalar.value_info).toEqual({ type: "numpy.float32", shape: [], dtype: "float32" });

  const series = await h.run("df['temp']");
  expect(series.return_value).toBe(
    'pandas.Series 3 values, dtype float64, name "temp"\n0   3.5\n1  19.2\n2  28.1',
  );
  expect(series.value_info).toEqual({ type: "pandas.Series", shape: [3], dtype: "float64" });

  const range = await h.run("df.index");
  expect(range.return_value).toBe("pandas.RangeIndex(start=0, stop=3, step=1)");
  expect(range.value_info).toEqual({ type: "pandas.RangeIndex", shape: [3], dtype: "int64" });

  // pandas 1.x builds an integer index as its own Int64Index subclass; pandas 2 as Index.
  const numeric = await h.run("pd.Index([10, 20])");
  expect(numeric.return_value).toMatch(/^pandas\.(Int64Index|Index) 2 values, dtype int64: \[10, 20\]$/);

  const dates = await h.run("np.array(['2024-01-01', 'NaT'], dtype='datetime64[ns]')");
  expect(dates.return_value).toBe("numpy.ndarray shape=(2,) dtype=datetime64[ns]\n[2024-01-01, NaT]");
});

real("an object column shows builtin values, and only the type name of anything else", async () => {
  const result = await h.run(
    `${LOUD}\nimport datetime\nframe = pd.DataFrame({'a': [Loud(), 'x\\ty', 1, None, 2.5, True, datetime.date(2024, 5, 1)]})\nframe`,
  );
  expect(result.success).toBe(true);
  expect(result.stdout).toBe("");
  expect(result.return_value).toBe(
    [
      "pandas.DataFrame 7 rows × 1 column",
      "            a",
      "0      <Loud>",
      "1        x\\ty",
      "2           1",
      "3        None",
      "4         2.5",
      "5        True",
      "6  2024-05-01",
      "dtypes: a object",
    ].join("\n"),
  );
  // An object array, a Series and a nested list in a cell: still nothing of Loud's runs.
  const array = await h.run("np.array([Loud(), [Loud(), 2], {'k': Loud()}], dtype=object)");
  expect(array.return_value).toBe(
    'numpy.ndarray shape=(3,) dtype=object\n[<Loud>, [<Loud>, 2], {"k": <Loud>}]',
  );
  await h.run("pd.Series([Loud()] * 20)");
  await h.run(
    "pd.DataFrame({'when': [datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)], Loud(): [1]})",
  );
  const calls = await h.run("Loud.calls");
  expect(calls.value).toBe(0);
});

/** User code reachable from pandas and numpy values beyond their elements: every hook counts its calls. */
const HOOKS = [
  "import datetime",
  "import numpy as np",
  "import pandas as pd",
  "from pandas.api.extensions import ExtensionArray, ExtensionDtype",
  "hooks = []",
  "class Zone(datetime.tzinfo):",
  "    def utcoffset(self, when): hooks.append('utcoffset'); return datetime.timedelta(hours=1)",
  "    def dst(self, when): hooks.append('dst'); return datetime.timedelta(0)",
  "    def tzname(self, when): hooks.append('tzname'); return 'Z'",
  "    def __str__(self): hooks.append('str'); return 'Z'",
  "    __repr__ = __str__",
  "class Title:",
  "    def __repr__(self): hooks.append('title'); return 't'",
  "    __str__ = __repr__",
  "class MyIndex(pd.Index):",
  "    def __len__(self): hooks.append('len'); return 3",
  "class D(ExtensionDtype):",
  "    name = 'd'",
  "    type = object",
  "    @classmethod",
  "    def construct_array_type(cls): return A",
  "class A(ExtensionArray):",
  "    def __init__(self, values): self.values = list(values)",
  "    @property",
  "    def dtype(self): hooks.append('dtype'); return D()",
  "    def __len__(self): hooks.append('len'); return len(self.values)",
  "    def __getitem__(self, i):",
  "        hooks.append('getitem')",
  "        return A(self.values[i]) if isinstance(i, slice) else self.values[i]",
  "    def isna(self): return np.zeros(len(self.values), bool)",
  "    def copy(self): return A(self.values)",
  "    @classmethod",
  "    def _from_sequence(cls, values, dtype=None, copy=False): return A(values)",
  "    def take(self, at, allow_fill=False, fill_value=None): return A([self.values[i] for i in at])",
  "    @property",
  "    def nbytes(self): return 0",
  "    @classmethod",
  "    def _concat_same_type(cls, arrays): return A(sum((a.values for a in arrays), []))",
  "zoned = pd.Series(pd.date_range('2024', periods=3, tz=Zone()))",
  "structured = np.zeros(2, dtype=np.dtype([((Title(), 'x'), 'i4')]))",
  "indexed = pd.DataFrame({'a': [1, 2, 3]})",
  "indexed.index = MyIndex._simple_new(np.arange(3))",
  "extended = pd.DataFrame({'e': A([1, 2, 3]), 'n': [1, 2, 3]})",
  "hooks.clear()",
].join("\n");

real(
  "no user code runs through a time zone, an index class, an extension array or a dtype's titles",
  async () => {
    const setup = await h.run(HOOKS);
    expect(setup.success, JSON.stringify(setup.error)).toBe(true);
    const zoned = await h.run("zoned");
    expect(zoned.return_value.split("\n")[0]).toBe("pandas.Series 3 values, dtype <DatetimeTZDtype>");
    const structured = await h.run("structured");
    expect(structured.return_value.split("\n")[0]).toBe("numpy.ndarray shape=(2,) dtype=|V4");
    // A user index class: not previewed by us at all (its length is the user's), so the ordinary preview.
    const indexed = await h.run("indexed");
    expect(indexed.value_info).toBeUndefined();
    const extended = await h.run("extended");
    expect(extended.value_info?.dtypes).toEqual({ e: "<A>", n: "int64" });
    expect(extended.return_value).toContain("0  <A>  1");
    // Building these runs A's code (pandas asks its length and dtype); only what follows is the preview.
    const column = await h.run("column = extended['e']\nhooks.clear()\ncolumn");
    expect(column.value_info?.dtype).toBe("<A>");
    await h.run("index = pd.Index(A([1, 2]))\nhooks.clear()\nindex");
    // Times in a library's zones are still shown.
    const oslo = await h.run("pd.Series(pd.date_range('2024', periods=2, tz='UTC'))");
    expect(oslo.return_value.split("\n")[0]).toBe("pandas.Series 2 values, dtype datetime64[ns, UTC]");
    expect((await h.run("hooks")).value).toEqual([]);
  },
);

real("pandas' own extension dtypes are previewed through pandas", async () => {
  const result = await h.run(
    "pd.DataFrame({'c': pd.Categorical(['x', 'y']), 'n': pd.array([1, None], dtype='Int64'), 't': pd.to_datetime(['2024-01-01', None])})",
  );
  expect(result.return_value).toBe(
    [
      "pandas.DataFrame 2 rows × 3 columns",
      "   c     n           t",
      "0  x     1  2024-01-01",
      "1  y  <NA>         NaT",
      "dtypes: c category, n Int64, t datetime64[ns]",
    ].join("\n"),
  );
  expect(result.value_info.dtypes).toEqual({ c: "category", n: "Int64", t: "datetime64[ns]" });
});

real("a user subclass of a DataFrame or an ndarray is previewed as any other object", async () => {
  const frame = await h.run("class Mine(pd.DataFrame):\n    pass\nMine({'a': [1]})");
  expect(frame.return_value).toBe("<Mine; safe preview omitted>");
  expect(frame.value_info).toBeUndefined();
  expect(frame.truncated.return).toBe(true);
  const array = await h.run("class Grid(np.ndarray):\n    pass\nnp.zeros(3).view(Grid)");
  expect(array.return_value).toBe("<Grid; safe preview omitted>");
  // A look-alike with the library's names is not the library's class.
  const fake = await h.run("Fake = type('DataFrame', (), {'__module__': 'pandas'})\nFake()");
  expect(fake.return_value).toBe("<DataFrame; safe preview omitted>");
});

real("a 10-million-row frame: its first and last rows, and no artifact", async () => {
  const result = await h.run(
    "big = pd.DataFrame({'a': np.arange(10_000_000), 'b': np.arange(10_000_000) * 0.5})\nbig",
    { timeout: 300 },
  );
  expect(result.success).toBe(true);
  const lines = result.return_value.split("\n");
  expect(lines[0]).toBe("pandas.DataFrame 10000000 rows × 2 columns");
  expect(lines[2]).toMatch(/^\s+0\s+0\s+0\.0$/);
  expect(lines[7]).toMatch(/^\s+\.\.\.\s+\.\.\.\s+\.\.\.$/);
  expect(lines[12]).toMatch(/^9999999\s+9999999\s+4999999\.5$/);
  expect(lines.length).toBe(14);
  expect(result.value_info.shape).toEqual([10_000_000, 2]);
  expect(result.truncated.return).toBe(true);
  expect(result.artifact).toBeUndefined();
  expect(result.artifact_error).toBeUndefined();
});

real("a wide frame lists its first 50 columns and says it cut them", async () => {
  const result = await h.run("pd.DataFrame(np.zeros((2, 120)), columns=[f'c{i}' for i in range(120)])");
  expect(result.value_info.columns.length).toBe(50);
  expect(result.value_info.columns[49]).toBe("c49");
  expect(Object.keys(result.value_info.dtypes).length).toBe(50);
  expect(result.value_info.columns_truncated).toBe(true);
  const header = result.return_value.split("\n")[1];
  expect(header).toContain("c9  ...  c110");
  expect(Buffer.byteLength(result.return_value)).toBeLessThanOrEqual(20_000);
});

real("with pandas and numpy not imported, nothing of them is touched", async () => {
  // A fresh worker; a finder records every import attempt, and stand-ins in sys.modules that are
  // not modules record every attribute read. The trailing values must cause neither.
  const setup = await h.run(
    [
      "import sys",
      "attempts = []",
      "class Watch:",
      "    def find_spec(self, name, path=None, target=None):",
      "        if name.split('.')[0] in ('numpy', 'pandas', 'polars'):",
      "            attempts.append(name)",
      "        return None",
      "sys.meta_path.insert(0, Watch())",
      "class Trap:",
      "    def __getattribute__(self, name):",
      "        attempts.append('read ' + name)",
      "        raise AttributeError(name)",
      "sys.modules['polars'] = Trap()",
      "sorted(name for name in ('numpy', 'pandas') if name in sys.modules)",
    ].join("\n"),
    { reset: true },
  );
  expect(setup.value).toEqual([]);
  const value = await h.run("class DataFrame:\n    pass\nDataFrame()");
  expect(value.return_value).toBe("<DataFrame; safe preview omitted>");
  await h.run("object()");
  const after = await h.run(
    "del sys.modules['polars']\n(attempts, sorted(name for name in ('numpy', 'pandas') if name in sys.modules))",
  );
  expect(after.value).toEqual([[], []]);
});

real("polars frames and series, through a stand-in module that is not polars", async () => {
  // The real polars cannot be installed here (no PyPI). This module named `polars` offers the calls
  // the preview makes (shape, columns, dtypes, to_series, slice, to_list, len, name, dtype), which
  // checks the identity rule and the rendering, not polars itself.
  const site = join(h.dir, "standin");
  mkdirSync(join(site, "polars"), { recursive: true });
  writeFileSync(
    join(site, "polars", "__init__.py"),
    [
      "class DataType:",
      "    def __init__(self, name): self._name = name",
      "    def __str__(self): return self._name",
      "class Series:",
      "    def __init__(self, name, values, dtype): self.name, self._values, self.dtype = name, list(values), dtype",
      "    def len(self): return len(self._values)",
      "    def slice(self, offset, length): return Series(self.name, self._values[offset:offset + length], self.dtype)",
      "    def to_list(self): return list(self._values)",
      "class DataFrame:",
      "    def __init__(self, columns): self._series = [Series(n, v, DataType(d)) for n, (v, d) in columns.items()]",
      "    @property",
      "    def shape(self): return (self._series[0].len() if self._series else 0, len(self._series))",
      "    @property",
      "    def columns(self): return [s.name for s in self._series]",
      "    @property",
      "    def dtypes(self): return [s.dtype for s in self._series]",
      "    def to_series(self, index): return self._series[index]",
    ].join("\n"),
  );
  const frame = await h.run(
    `import sys\nsys.path.insert(0, ${JSON.stringify(site)})\nimport polars as pl\n${LOUD}\n` +
      "pl.DataFrame({'n': (list(range(12)), 'Int64'), 'o': ([Loud()] * 12, 'Object')})",
  );
  expect(frame.return_value).toBe(
    [
      "polars.DataFrame 12 rows × 2 columns",
      "       n       o",
      "  0    0  <Loud>",
      "  1    1  <Loud>",
      "  2    2  <Loud>",
      "  3    3  <Loud>",
      "  4    4  <Loud>",
      "...  ...     ...",
      "  7    7  <Loud>",
      "  8    8  <Loud>",
      "  9    9  <Loud>",
      " 10   10  <Loud>",
      " 11   11  <Loud>",
      "dtypes: n Int64, o Object",
    ].join("\n"),
  );
  expect(frame.value_info).toEqual({
    type: "polars.DataFrame",
    shape: [12, 2],
    dtypes: { n: "Int64", o: "Object" },
    columns: ["n", "o"],
    columns_truncated: false,
  });
  const series = await h.run("pl.Series('x', [1.5, None], pl.DataType('Float64'))");
  expect(series.return_value).toBe('polars.Series 2 values, dtype Float64, name "x"\n0   1.5\n1  None');
  const subclass = await h.run("class Mine(pl.DataFrame):\n    pass\nMine({})");
  expect(subclass.return_value).toBe("<Mine; safe preview omitted>");
  expect((await h.run("Loud.calls")).value).toBe(0);
});
