"""Minimal stand-in for the `expecttest` package (Debian has none), enough for torch's test utilities to
import: TestCase with assertExpectedInline comparing exactly (no in-place rewriting of expectations)."""

import unittest

ACCEPT = False  # torch sets it from --accept; this stub never rewrites expectations


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802 (upstream name)
        self.assertMultiLineEqual(expect.strip(), actual.strip())

    def assertExpectedRaisesInline(self, exc_type, callable, expect, *args, **kwargs):  # noqa: N802
        with self.assertRaises(exc_type) as cm:
            callable(*args, **kwargs)
        self.assertExpectedInline(str(cm.exception), expect)
