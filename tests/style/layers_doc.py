#!/usr/bin/env python3
"""Keeps the allowed edges shown in docs/ARCHITECTURE.md equal to the layering check's own list.

Usage: layers_doc.py SOURCE_DIR [--write]

The block is the fenced one right after the heading "### Allowed edges" of docs/ARCHITECTURE.md; it holds the
rule lines of tests/style/layers.txt (`LAYER: DEPENDENCY ...`, comments and blank lines left out), in the list's
order. Exit status 0 when they are equal, 1 (naming the first difference) when not; --write rewrites the block
from the list instead.
"""

import os
import sys

HEADING = '### Allowed edges'


def rules(layers_path):
    out = []
    with open(layers_path, encoding='utf-8') as f:
        for raw in f:
            line = ' '.join(raw.split('#', 1)[0].split())
            if line:
                out.append(line)
    return out


def block_span(lines):
    """Returns (first, end) line indexes of the fenced block's contents after the heading."""
    start = next((i for i, l in enumerate(lines) if l.strip() == HEADING), None)
    if start is None:
        raise ValueError(f'no "{HEADING}" heading')
    fence = next((i for i in range(start + 1, len(lines)) if lines[i].startswith('```')), None)
    if fence is None or any(l.startswith('#') for l in lines[start + 1:fence]):
        raise ValueError(f'no fenced block in the "{HEADING}" section')
    end = next((i for i in range(fence + 1, len(lines)) if lines[i].startswith('```')), None)
    if end is None:
        raise ValueError('the fenced block is not closed')
    return fence + 1, end


def main(argv):
    if len(argv) < 2 or len(argv) > 3 or (len(argv) == 3 and argv[2] != '--write'):
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    doc = os.path.join(root, 'docs/ARCHITECTURE.md')
    want = rules(os.path.join(root, 'tests', 'style', 'layers.txt'))
    with open(doc, encoding='utf-8') as f:
        lines = f.read().split('\n')
    try:
        first, end = block_span(lines)
    except ValueError as e:
        print(f'{doc}: {e}', file=sys.stderr)
        return 1
    have = [' '.join(l.split()) for l in lines[first:end] if l.strip()]
    if len(argv) == 3:
        lines[first:end] = want
        with open(doc, 'w', encoding='utf-8') as f:
            f.write('\n'.join(lines))
        return 0
    for i in range(max(len(have), len(want))):
        h = have[i] if i < len(have) else '(nothing)'
        w = want[i] if i < len(want) else '(nothing)'
        if h != w:
            print(f'{doc}: line {i + 1} of the allowed edges shows "{h}", tests/style/layers.txt says "{w}" '
                  f'(regenerate: tests/style/layers_doc.py . --write)', file=sys.stderr)
            return 1
    print(f'layers_doc: the {len(want)} rules of tests/style/layers.txt are the ones docs/ARCHITECTURE.md shows')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
