"""Reads a `dist_suite.py -v` log (unittest verbose output) and prints one line per test: `name verdict`, with
verdict ok, FAIL, ERROR, skipped, expected_failure or unknown (no verdict: the run was cut short). With
--reasons, skipped tests carry their skip message after the verdict.

  dist_suite_results.py LOG [--reasons]
"""

import re
import sys

# "test_x (__main__.Cls.test_x) ... <verdict>": the verdict may follow rank output on later lines, and skip
# messages are quoted with ' or " (repr of the message).
TEST = re.compile(r"^(test_\w+) \(__main__\.\S+\) \.\.\. (.*?)(?=^test_\w+ \(__main__|^-{20,}$|\Z)", re.M | re.S)
VERDICT = re.compile(r"\b(ok$|FAIL$|ERROR$|skipped (?:'[^'\n]*'|\"[^\"\n]*\")|expected failure)", re.M)


def parse(text):
    res = {}
    for m in TEST.finditer(text):
        v = VERDICT.search(m.group(2))
        if not v:
            res[m.group(1)] = ("unknown", "")
        elif v.group(1).startswith("skipped"):
            res[m.group(1)] = ("skipped", v.group(1)[len("skipped "):].strip("'\""))
        else:
            res[m.group(1)] = (v.group(1).replace(" ", "_"), "")
    return res


def main():
    res = parse(open(sys.argv[1], errors="replace").read())
    reasons = "--reasons" in sys.argv[2:]
    for name in sorted(res):
        verdict, why = res[name]
        print(f"{name} {verdict}" + (f" {why}" if reasons and why else ""))


if __name__ == "__main__":
    main()
