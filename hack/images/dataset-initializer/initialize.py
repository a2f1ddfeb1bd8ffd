"""Dataset initializer for ``ghcr.io/kubeflow/trainer/dataset-initializer`` on an offline cluster.

Upstream's initializer downloads ``STORAGE_URI`` (``hf://...``) into ``/workspace/dataset`` before
the trainer starts. This cluster reaches no hub, so this image makes the dataset locally from a
``synthetic://<name>?rows=<n>&features=<f>&seed=<s>`` URI: a deterministic CSV of ``n`` rows
(``f`` features and a label) and ``meta.json`` (URI, rows, features, SHA-256 of the CSV), written
atomically (the directory appears complete or not at all). Any other scheme fails with a message
saying so. The output directory is ``DATASET_DIR`` (default ``/workspace/dataset``).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sys
from urllib.parse import parse_qs, urlparse


def main() -> int:
    uri = os.environ.get("STORAGE_URI", "")
    out = os.environ.get("DATASET_DIR", "/workspace/dataset")
    parsed = urlparse(uri)
    if parsed.scheme != "synthetic":
        print(
            f"dataset-initializer: cannot fetch {uri!r}: this offline image only makes "
            "synthetic://<name>?rows=N datasets",
            file=sys.stderr,
        )
        return 2
    query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
    rows, features = int(query.get("rows", "1000")), int(query.get("features", "4"))
    rng = random.Random(int(query.get("seed", "0")))
    lines = [",".join([f"x{i}" for i in range(features)] + ["y"])]
    for _ in range(rows):
        xs = [rng.uniform(-1, 1) for _ in range(features)]
        lines.append(",".join(f"{x:.6f}" for x in [*xs, sum(xs)]))
    data = ("\n".join(lines) + "\n").encode()
    tmp = out.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    with open(os.path.join(tmp, "data.csv"), "wb") as f:
        f.write(data)
    meta = {
        "uri": uri,
        "name": parsed.netloc,
        "rows": rows,
        "features": features,
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    with open(os.path.join(tmp, "meta.json"), "w") as f:
        json.dump(meta, f)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    print(
        f"dataset-initializer: wrote {rows} rows of {parsed.netloc!r} to {out} "
        f"(sha256 {meta['sha256'][:12]})",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
