#!/usr/bin/env python3
"""Checks that no function in runtime/ is longer than a limit.

Usage: function_length.py SOURCE_DIR [--limit N] [--allow FILE] [--list]

Scans SOURCE_DIR/runtime/**/*.cc and *.h. A function is a brace block opened at namespace scope (or in a class
body) after text holding a parenthesis: a free function, a member defined out of line or in its class. Its length
is the lines from its signature's first line to its closing brace. Comments, string and character literals are
skipped, so braces inside them do not count. Lambdas and blocks inside a function are part of it.

--allow FILE (default: SOURCE_DIR/tests/style/function_length_allow.txt) lists functions allowed to be longer,
one `PATH:NAME` a line (`#` comments); an entry that no longer matches a long function is an error too, so the
list only shrinks. --list prints every function over the limit and exits 0.

Exit status: 0 when every function is within the limit, 1 otherwise (each printed as
`PATH:LINE: NAME is N lines, over the limit of L`), 2 on bad usage.
"""

import os
import re
import sys

DEFAULT_LIMIT = 100
KEYWORDS = {'if', 'for', 'while', 'switch', 'catch', 'return', 'sizeof', 'alignof', 'decltype', 'static_assert'}


def strip(text):
    """The text with comments and string/char literals blanked (newlines kept, so line numbers stay)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            k = text.find('(', i + 2)
            delim = text[i + 2:k]
            j = text.find(')' + delim + '"', k)
            j = n if j < 0 else j + len(delim) + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif c in '"\'':
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator (1'000)
                out.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            j = min(j + 1, n)
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def blank_directives(text):
    """The text with preprocessor directives (and their continuation lines) blanked."""
    lines = text.split('\n')
    continued = False
    for k, line in enumerate(lines):
        if continued or line.lstrip().startswith('#'):
            continued = line.rstrip().endswith('\\')
            lines[k] = ''
    return '\n'.join(lines)


def function_name(head):
    """The name before the parameter list of a function's head text, or None when it is not a function."""
    head = re.sub(r'\s+', ' ', head).strip()
    if '(' not in head or head.startswith('#'):
        return None
    # Drop a constructor's initialiser list: the name's parameter list is the first balanced (...) after it.
    m = re.search(r'([~\w:<>]+)\s*\(', head)
    while m and m.group(1).split('::')[-1] in KEYWORDS:
        m = re.search(r'([~\w:<>]+)\s*\(', head[m.end():])
    if not m:
        return None
    return m.group(1)


def functions(path):
    """Yields (name, first_line, last_line) of every function in one file."""
    with open(path, encoding='utf-8', errors='replace') as f:
        text = blank_directives(strip(f.read()))
    stack = []  # 'scope' (namespace, class, extern) or 'fn' / 'block'
    head_start = 0  # offset where the text before the next '{' began
    line_at = [0]
    for idx, ch in enumerate(text):
        if ch == '\n':
            line_at.append(idx + 1)
    import bisect

    def line_of(offset):
        return bisect.bisect_right(line_at, offset)

    starts = []
    for i, ch in enumerate(text):
        if ch == '{':
            head = text[head_start:i]
            inside_fn = any(k == 'fn' for k in stack)
            if inside_fn:
                stack.append('block')
            else:
                name = function_name(head.split(';')[-1].split('}')[-1])
                compact = re.sub(r'\s+', ' ', head).strip()
                if name and not re.match(r'^(namespace|class|struct|union|enum)\b', compact.split(';')[-1].strip()):
                    stack.append('fn')
                    first = head_start + len(head) - len(head.lstrip())
                    starts.append((name, line_of(first)))
                else:
                    stack.append('scope')
            head_start = i + 1
        elif ch == '}':
            kind = stack.pop() if stack else 'scope'
            if kind == 'fn':
                name, first = starts.pop()
                yield name, first, line_of(i)
            head_start = i + 1
        elif ch == ';' and not any(k == 'fn' for k in stack):
            head_start = i + 1


def read_allow(path):
    allow = set()
    if not os.path.exists(path):
        return allow
    with open(path, encoding='utf-8') as f:
        for raw in f:
            line = raw.split('#', 1)[0].strip()
            if line:
                allow.add(line)
    return allow


def main(argv):
    args = argv[1:]
    if not args or args[0].startswith('--'):
        print(__doc__, file=sys.stderr)
        return 2
    root = args.pop(0)
    limit, allow_path, list_only = DEFAULT_LIMIT, os.path.join(root, 'tests', 'style', 'function_length_allow.txt'), False
    while args:
        a = args.pop(0)
        if a == '--limit' and args:
            limit = int(args.pop(0))
        elif a == '--allow' and args:
            allow_path = args.pop(0)
        elif a == '--list':
            list_only = True
        else:
            print(f'function_length: unknown argument {a}', file=sys.stderr)
            return 2
    allow = read_allow(allow_path)
    long_ones, seen = [], set()
    scanned = 0
    for base, _, files in os.walk(os.path.join(root, 'runtime')):
        for name in sorted(files):
            if not name.endswith(('.cc', '.h')):
                continue
            path = os.path.join(base, name)
            rel = os.path.relpath(path, root)
            for fn, first, last in functions(path):
                scanned += 1
                length = last - first + 1
                if length <= limit:
                    continue
                key = f'{rel}:{fn}'
                seen.add(key)
                if list_only or key not in allow:
                    long_ones.append(f'{rel}:{first}: {fn} is {length} lines, over the limit of {limit}')
    for line in sorted(long_ones):
        print(line)
    if list_only:
        return 0
    stale = sorted(allow - seen)
    for key in stale:
        print(f'{allow_path}: {key} is allowed but is no longer over {limit} lines: remove it from the list')
    if long_ones or stale:
        return 1
    print(f'function_length: {scanned} functions in runtime/ within {limit} lines ({len(allow)} allowed longer)')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
