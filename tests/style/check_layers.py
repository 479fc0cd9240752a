#!/usr/bin/env python3
"""Checks every project #include against the allowed edges between folders.

Usage: check_layers.py SOURCE_DIR [LAYERS_FILE]

LAYERS_FILE (default: SOURCE_DIR/tests/style/layers.txt) lists, once, which folder (a "layer") may include
which. Each non-comment line is

    LAYER: DEPENDENCY DEPENDENCY ...

A file belongs to the longest layer that is a prefix of its path; a quoted include ("runtime/api/x.h") is
resolved the same way. Includes inside one layer are always allowed; includes of files outside the project
(system, Abseil, gRPC, nlohmann, CLI11) are not checked; generated headers are mapped by the `generated`
lines (`generated: PREFIX LAYER`). A layer missing from the file may include nothing of the project.

Besides every include, the listed edges themselves must form no cycle, so the file cannot allow one.
Exit status: 0 when every include is allowed, 1 otherwise (each offending include printed as
`FILE:LINE: LAYER includes DEPENDENCY ("HEADER"), which LAYERS_FILE does not allow`), 2 on a bad layers file.
"""

import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_SUFFIXES = ('.h', '.hpp', '.cc', '.cpp', '.c')


def parse_layers(path):
    """Returns (allowed: {layer: set}, generated: [(prefix, layer)], unchecked: [prefix])."""
    allowed, generated, unchecked = {}, [], []
    with open(path, encoding='utf-8') as f:
        for number, raw in enumerate(f, 1):
            line = raw.split('#', 1)[0].strip()
            if not line:
                continue
            if ':' not in line:
                raise ValueError(f'{path}:{number}: expected "LAYER: DEPENDENCY ...", got "{raw.strip()}"')
            head, tail = (part.strip() for part in line.split(':', 1))
            words = tail.split()
            if head == 'generated':
                if len(words) != 2:
                    raise ValueError(f'{path}:{number}: expected "generated: PREFIX LAYER"')
                generated.append((words[0], words[1]))
            elif head == 'unchecked':
                unchecked.extend(words)
            else:
                if head in allowed:
                    raise ValueError(f'{path}:{number}: layer {head} listed twice')
                allowed[head] = set(words)
    for layer, deps in allowed.items():
        for dep in deps:
            if dep not in allowed:
                raise ValueError(f'{path}: {layer} may include {dep}, which is not a listed layer')
    for _, layer in generated:
        if layer not in allowed:
            raise ValueError(f'{path}: generated headers map to {layer}, which is not a listed layer')
    return allowed, generated, unchecked


def find_cycle(allowed):
    """A cycle among the allowed edges, as a list of layers, or None."""
    state = {}

    def visit(layer, stack):
        state[layer] = 'open'
        stack.append(layer)
        for dep in sorted(allowed[layer]):
            if state.get(dep) == 'open':
                return stack[stack.index(dep):] + [dep]
            if dep not in state:
                cycle = visit(dep, stack)
                if cycle:
                    return cycle
        stack.pop()
        state[layer] = 'done'
        return None

    for layer in sorted(allowed):
        if layer not in state:
            cycle = visit(layer, [])
            if cycle:
                return cycle
    return None


def layer_of(path, layers):
    best = None
    for layer in layers:
        if path == layer or path.startswith(layer + '/'):
            if best is None or len(layer) > len(best):
                best = layer
    return best


def source_files(root):
    try:
        out = subprocess.run(['git', '-C', root, 'ls-files', '--cached', '--others', '--exclude-standard'],
                             check=True, capture_output=True, text=True).stdout.split()
        if out:
            return [p for p in out if p.endswith(SOURCE_SUFFIXES) and os.path.isfile(os.path.join(root, p))]
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for top, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith('.') and not d.startswith('build')]
        for name in names:
            if name.endswith(SOURCE_SUFFIXES):
                files.append(os.path.relpath(os.path.join(top, name), root))
    return files


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = argv[1]
    layers_file = argv[2] if len(argv) == 3 else os.path.join(root, 'tests', 'style', 'layers.txt')
    try:
        allowed, generated, unchecked = parse_layers(layers_file)
    except (OSError, ValueError) as e:
        print(f'check_layers: {e}', file=sys.stderr)
        return 2
    cycle = find_cycle(allowed)
    if cycle:
        print(f'check_layers: {layers_file} allows a cycle: {" -> ".join(cycle)}', file=sys.stderr)
        return 1
    layers = list(allowed)
    files = source_files(root)
    if not files:
        print(f'check_layers: no source files under {root}', file=sys.stderr)
        return 2
    bad = checked = 0
    for path in sorted(files):
        if any(path == u or path.startswith(u + '/') for u in unchecked):
            continue
        src = layer_of(path, layers)
        with open(os.path.join(root, path), encoding='utf-8', errors='replace') as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                header = m.group(1)
                dst = next((layer for prefix, layer in generated if header.startswith(prefix)), None)
                if dst is None:
                    dst = layer_of(header, layers)
                if dst is None:
                    continue  # outside the project: system or third-party header
                checked += 1
                if src is None:
                    print(f'{path}:{number}: {path} is in no layer of {layers_file}; add its folder there')
                    bad += 1
                elif dst != src and dst not in allowed[src]:
                    print(f'{path}:{number}: {src} includes {dst} ("{header}"), which {layers_file} does not allow')
                    bad += 1
    if bad:
        print(f'check_layers: {bad} include(s) break the layering ({layers_file})', file=sys.stderr)
        return 1
    print(f'check_layers: {checked} project includes in {len(files)} files follow {layers_file}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
