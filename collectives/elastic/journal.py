"""``DIR/elastic.json``: the driver's record of generations and resets (format in
docs/ELASTIC.md), replaced atomically after every change so a reader never sees half a file."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

FORMAT = 1
FILE = "elastic.json"


def gen_dir(root: Path, generation: int) -> Path:
    return root / f"gen-{generation:03d}"


class Journal:
    def __init__(self, root: Path | None, min_np: int, max_np: int):
        self.root = root
        self.data: dict[str, Any] = {"elastic_format": FORMAT, "min_np": min_np, "max_np": max_np,
                                     "generations": [], "resets": []}

    def write(self) -> None:
        if self.root is None:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{FILE}.tmp"
        tmp.write_text(json.dumps(self.data, indent=1) + "\n")
        os.replace(tmp, self.root / FILE)
