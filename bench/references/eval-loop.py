"""The composed floor's Python side: the least a persistent REPL worker can be.

Reads one JSON object per line on stdin ({"id": N, "code": "..."}), evaluates the code in one
persistent namespace (as an expression if it is one, else as statements), and writes one JSON line
back ({"id": N, "value": repr-or-null} or {"id": N, "error": "..."}). Standard library only.

Under the floor bridge (bench/references/floor-bridge.ts) a cell may call `call(tool, arguments)`: it
writes {"call": tool, "arguments": {...}} and blocks until the server's one-line answer ({"result": ...}
or {"error": "..."}) arrives on stdin. With `stamps=[...]` it appends (sent, received): the monotonic
nanoseconds before its line is encoded and written, and once the answer is read and parsed.
"""

import json
import sys
import time


class BoundedOutput:
    """Keeps the first 50,000 characters a cell prints and drops the rest, as a bounded REPL must."""

    def __init__(self) -> None:
        self.kept = []
        self.room = 50_000

    def write(self, text: str) -> int:
        if self.room > 0:
            piece = text[: self.room]
            self.kept.append(piece)
            self.room -= len(piece)
        return len(text)

    def flush(self) -> None:
        pass


def main() -> None:
    out = sys.stdout
    answers = sys.stdin.buffer

    def call(tool, arguments=None, stamps=None):
        if stamps is not None:
            sent = time.monotonic_ns()
        out.write(json.dumps({"call": tool, "arguments": arguments or {}}) + "\n")
        out.flush()
        answer = json.loads(answers.readline())
        if stamps is not None:
            stamps.append((sent, time.monotonic_ns()))
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer["result"]

    namespace = {"__name__": "__main__", "call": call}
    for raw in answers:
        request = json.loads(raw)
        reply = {"id": request["id"]}
        try:
            source = request["code"]
            sys.stdout = BoundedOutput()
            try:
                compiled = compile(source, "<cell>", "eval")
            except SyntaxError:
                exec(compile(source, "<cell>", "exec"), namespace)
                reply["value"] = None
            else:
                reply["value"] = repr(eval(compiled, namespace))
        except BaseException as error:  # noqa: BLE001 - a REPL reports every failure
            reply["error"] = f"{type(error).__name__}: {error}"
        finally:
            sys.stdout = out
        out.write(json.dumps(reply) + "\n")
        out.flush()


main()
