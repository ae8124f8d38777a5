"""The SDK, the examples and every Python snippet of the docs stay within the
SDK's stated minimum Python (``requires-python`` in pyproject.toml): parsed
with that version's grammar, and no ``X | Y`` annotation evaluated at run
time where that version cannot (without ``from __future__ import annotations``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[3]


def minimum_version() -> Tuple[int, int]:
    text = (ROOT / "sdk" / "python" / "pyproject.toml").read_text()
    found = re.search(r'requires-python\s*=\s*">=(\d+)\.(\d+)"', text)
    assert found, "requires-python not found in pyproject.toml"
    return int(found.group(1)), int(found.group(2))


def sources() -> List[Tuple[str, str]]:
    """(name, code) of every Python file and every ```python block of the docs."""
    found = []
    files = [*(ROOT / "sdk" / "python").rglob("*.py"), *(ROOT / "examples").glob("*.py")]
    for path in files:
        if "build" not in path.parts:
            found.append((str(path.relative_to(ROOT)), path.read_text()))
    for doc in [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "sdk/python/README.md"]:
        if not doc.exists():
            continue
        blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), re.S)
        for index, block in enumerate(blocks, 1):
            found.append((f"{doc.relative_to(ROOT)} python block {index}", block))
    return found


def union_annotations(tree: ast.AST) -> List[int]:
    """Lines of annotations that use ``X | Y``."""
    lines = []
    for node in ast.walk(tree):
        annotations = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            every += [a for a in (arguments.vararg, arguments.kwarg) if a]
            annotations = [a.annotation for a in every if a.annotation] + [node.returns]
        elif isinstance(node, ast.AnnAssign):
            annotations = [node.annotation]
        for annotation in annotations:
            if annotation is None:
                continue
            for part in ast.walk(annotation):
                if isinstance(part, ast.BinOp) and isinstance(part.op, ast.BitOr):
                    lines.append(part.lineno)
    return lines


@pytest.mark.parametrize("name,code", sources(), ids=lambda value: str(value)[:60])
def test_runs_on_the_minimum_python(name: str, code: str) -> None:
    version = minimum_version()
    try:
        tree = ast.parse(code, feature_version=version)
    except SyntaxError as error:
        pytest.fail(f"{name}: not Python {version[0]}.{version[1]}: {error}")
    postponed = "from __future__ import annotations" in code
    if version < (3, 10) and not postponed:
        lines = union_annotations(tree)
        assert not lines, (
            f"{name}: X | Y annotations (lines {lines}) fail on Python {version[0]}.{version[1]}; "
            "add 'from __future__ import annotations' or use Optional/Union"
        )
