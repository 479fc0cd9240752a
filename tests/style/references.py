#!/usr/bin/env python3
"""The repository stands on its own: every file a user clones (code, comments, docs, tests) is checked for

  outside-path   a path that leaves the repository (`../` climbing above the root, an absolute path into the
                 development machine's work area, /work/) or a document that does not resolve in it
                 (`X.md` or `dir/X.md` found neither from the repository's root nor from the file's folder, a
                 markdown link whose target is missing);
  missing-section
                 a section cited by name that the document does not have: `docs/X.md, Section` or
                 `docs/X.md, "Section"` where no heading of docs/X.md starts with Section;
  work-item      a citation of a work item as if the reader could look it up ("issue 7", "PR #12", "#4");
  history        development history told in place of current behaviour ("round 14", "rounds 1-12",
                 "session 2"): history lives in git.

Usage: tests/style/references.py [--root DIR] [FILE...]
  Without FILEs every tracked text file under DIR (default: the repository holding this script) is checked;
  FILEs (relative to DIR or absolute) check only those. Prints one line per finding, `path:line: rule: text`,
  and exits 1 when there is one, 0 otherwise.
"""

import argparse
import os
import re
import subprocess
import sys

# Files whose job is to name the patterns below.
EXEMPT = {"tests/style/references.py", "tests/style/references_selftest.sh"}
BINARY_SUFFIXES = (".db", ".png", ".jpg", ".gz", ".pb", ".bin", ".so", ".a")

HISTORY = re.compile(r"\b(?:rounds?|sessions?)(?:\s+|-)\d+(?:\s*(?:[-–]|to|and)\s*\d+)?\b", re.IGNORECASE)
WORK_ITEM = re.compile(
    r"\b(?:issues?|PRs?|pull requests?|work items?|bugs?)\s*#?\d+\b|(?:^|(?<=[\s(\[,;]))#\d+\b",
    re.IGNORECASE,
)
ABSOLUTE = re.compile(r"(?<![\w.$}])/work/[\w.-]*")
# A relative path starting with `../`, at the start of a token or after a `/` (`$root/../x`).
CLIMB = re.compile(r"(?:(?<![\w.])|(?<=/))((?:\.\./)+[\w.-]+(?:/[\w.-]+)*)")
# A markdown document named as a path: `X.md`, `docs/X.md`, `./X.md`.
DOC = re.compile(r"(?<![\w./-])((?:\.{1,2}/)?(?:[\w.-]+/)*[\w.-]+\.md)\b")
# A section cited after a document: `X.md, Timing` or `X.md, "The seed's case"` (any case, up to , ; : ) or .).
SECTION = re.compile(r"""([\w./-]+\.md),? (?:"([^"]+)"|([A-Z][\w-]*(?: [a-z][\w-]*)*))""")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True, capture_output=True).stdout
        return [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, subdirs, names in os.walk(root):
            subdirs[:] = [s for s in subdirs if not s.startswith(".") and not s.startswith("build")]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
        return files


def inside(root, path):
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root + os.sep)


def resolves(root, rel_file, target):
    """True when `target`, named in `rel_file`, is a file or folder of the repository."""
    here = os.path.dirname(os.path.join(root, rel_file))
    for base in (here, root):
        cand = os.path.normpath(os.path.join(base, target))
        if inside(root, cand) and os.path.exists(cand):
            return True
    return False


def headings(root, rel_file, target):
    """The headings of the markdown file `target` named in `rel_file`, lower-cased, or None when unresolved."""
    here = os.path.dirname(os.path.join(root, rel_file))
    for base in (here, root):
        cand = os.path.normpath(os.path.join(base, target))
        if inside(root, cand) and os.path.isfile(cand):
            with open(cand, encoding="utf-8", errors="replace") as f:
                return [l.lstrip("#").strip().lower() for l in f if l.startswith("#")]
    return None


def check_line(root, rel, lineno, line):
    found = []
    for m in HISTORY.finditer(line):
        found.append(("history", m.group(0)))
    for m in WORK_ITEM.finditer(line):
        found.append(("work-item", m.group(0).strip()))
    for m in ABSOLUTE.finditer(line):
        found.append(("outside-path", m.group(0)))
    for m in CLIMB.finditer(line):
        target = m.group(1)
        base = os.path.dirname(os.path.join(root, rel))
        if not inside(root, os.path.normpath(os.path.join(base, target))) or "shared/" in target:
            found.append(("outside-path", target))
    for m in DOC.finditer(line):
        if m.group(1).startswith("../") and any(m.group(1).startswith(t) for _, t in found):
            continue  # reported as a climb out of the repository
        if not resolves(root, rel, m.group(1)):
            found.append(("outside-path", m.group(1) + " (not in the repository)"))
    for m in SECTION.finditer(line):
        section = (m.group(2) or m.group(3)).strip().lower()
        heads = headings(root, rel, m.group(1))
        if heads is not None and not any(h.startswith(section) for h in heads):
            found.append(("missing-section", f"{m.group(1)} has no section '{m.group(2) or m.group(3)}'"))
    if rel.endswith(".md"):
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):  # http:, mailto:
                continue
            if not resolves(root, rel, target):
                found.append(("outside-path", f"link {target} (not in the repository)"))
    return [f"{rel}:{lineno}: {rule}: {text}" for rule, text in found]


def check_file(root, rel):
    path = os.path.join(root, rel)
    if rel in EXEMPT or rel.endswith(BINARY_SUFFIXES) or not os.path.isfile(path):
        return []
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data:
        return []
    text = data.decode("utf-8", errors="replace")
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        out += check_line(root, rel, lineno, line)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..")))
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    files = [os.path.relpath(os.path.abspath(os.path.join(root, f)), root) for f in args.files]
    files = files or tracked_files(root)
    findings = []
    for rel in sorted(files):
        findings += check_file(root, rel)
    for f in findings:
        print(f)
    if findings:
        print(f"{len(findings)} reference(s) a user of the repository cannot follow (rules: {sys.argv[0]} --help)",
              file=sys.stderr)
        return 1
    print(f"references: {len(files)} files, every reference resolves inside the repository")
    return 0


if __name__ == "__main__":
    sys.exit(main())
