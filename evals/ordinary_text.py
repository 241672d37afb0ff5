"""A corpus of ordinary text that nobody here wrote, gathered from what is installed on the machine.

Five kinds of line, each from files that ship with Python, the installed packages or the operating system:

- ``prose``: the long descriptions (``METADATA``) and licence texts of installed distributions;
- ``code``: the Python standard library's own modules (its tests included);
- ``logs``: the package manager's logs under ``/var/log`` (dpkg, apt, alternatives);
- ``hashes``: the ``RECORD`` files of installed distributions (``path,sha256=<digest>,size``);
- ``ids_urls``: lines of installed packages' sources and data that hold a UUID, a long hex string or a URL;
- ``secret_words``: lines of the standard library and installed packages that name a password, a token, a secret,
  a key or auth: the hardest case for rules that read a value by the name it is assigned to.

Files are read in sorted order and each kind keeps ``per_kind`` non-empty lines spread evenly over all of its
lines, so the corpus is the same on machines with the same installs. Lines that hold a real secret in these files
would count against a detector: nothing is filtered out.
"""

from __future__ import annotations

import re
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["KINDS", "ordinary_lines"]

KINDS = ("prose", "code", "logs", "hashes", "ids_urls", "secret_words")

_ID_OR_URL = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|\b[0-9a-f]{32,}\b|https?://\S+"
)


_SECRET_WORDS = re.compile(r"(?i)passw|passwd|pwd|token|secret|api_?key|access_?key|auth|credential")


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def _lines(paths: Iterable[Path], keep: re.Pattern[str] | None = None) -> Iterator[str]:
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if line.strip() and (keep is None or keep.search(line)):
                yield line


def _take(lines: Iterator[str], n: int) -> list[str]:
    """``n`` lines spread evenly over all of them, so every file has its say."""
    every = list(lines)
    if len(every) <= n:
        return every
    return [every[i * len(every) // n] for i in range(n)]


def ordinary_lines(per_kind: int = 3000) -> dict[str, list[str]]:
    """Up to ``per_kind`` non-empty lines of each kind (fewer where the machine has less)."""
    site = _site_packages()
    dist_infos = sorted(site.glob("*.dist-info"))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    logs = [Path("/var/log/dpkg.log"), Path("/var/log/apt/history.log"), Path("/var/log/apt/term.log")]
    logs += [Path("/var/log/alternatives.log")]
    sources = sorted(
        p
        for p in site.rglob("*")
        if p.suffix in {".py", ".json", ".txt", ".md", ".rst", ".toml", ".cfg"} and p.is_file()
    )
    return {
        "prose": _take(
            _lines(
                [d / "METADATA" for d in dist_infos]
                + sorted(p for d in dist_infos for p in d.rglob("*") if "LICEN" in p.name.upper() and p.is_file())
            ),
            per_kind,
        ),
        "code": _take(_lines(sorted(stdlib.rglob("*.py"))), per_kind),
        "logs": _take(_lines(p for p in logs if p.exists()), per_kind),
        "hashes": _take(_lines(d / "RECORD" for d in dist_infos), per_kind),
        "ids_urls": _take(_lines(sources, _ID_OR_URL), per_kind),
        "secret_words": _take(_lines([*sorted(stdlib.rglob("*.py")), *sources], _SECRET_WORDS), per_kind),
    }


if __name__ == "__main__":
    corpus = ordinary_lines()
    for kind, lines in corpus.items():
        print(f"{kind:10} {len(lines):6} lines", file=sys.stderr)
