"""The composed floor's Python side: the least a persistent REPL worker can be.

Reads one JSON object per line on stdin ({"id": N, "code": "..."}), evaluates the code in one
persistent namespace (as an expression if it is one, else as statements), and writes one JSON line
back ({"id": N, "value": repr-or-null} or {"id": N, "error": "..."}). Standard library only.
"""

import json
import sys


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
    namespace = {"__name__": "__main__"}
    out = sys.stdout
    for raw in sys.stdin.buffer:
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
