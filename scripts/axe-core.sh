#!/usr/bin/env bash
# Fetches the pinned axe-core (the accessibility engine the browser tests inject into every
# console page) from the npm registry into .venv-browser/axe-core-$VERSION/axe.min.js, unless it
# is there already. The tarball is checked against the registry's published integrity (sha512)
# before anything is unpacked: a different file is refused. Prints the script's path.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=4.14.1
INTEGRITY=sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ==
REGISTRY=${NPM_REGISTRY:-https://registry.npmjs.org}
dir=.venv-browser/axe-core-$VERSION
if [ ! -s "$dir/axe.min.js" ]; then
  mkdir -p "$dir"
  python3 - "$REGISTRY/axe-core/-/axe-core-$VERSION.tgz" "$INTEGRITY" "$dir" <<'PY'
import base64, hashlib, io, sys, tarfile, urllib.request
url, integrity, out = sys.argv[1:4]
with urllib.request.urlopen(url, timeout=60) as r:
    data = r.read()
got = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
if got != integrity:
    sys.exit(f"axe-core: {url} has integrity {got}, not the pinned {integrity}")
with tarfile.open(fileobj=io.BytesIO(data)) as t:
    for name in ("package/axe.min.js", "package/LICENSE"):
        member = t.extractfile(name)
        if member is None:
            sys.exit(f"axe-core: {name} missing from {url}")
        with open(f"{out}/{name.split('/')[-1]}", "wb") as f:
            f.write(member.read())
PY
fi
echo "$dir/axe.min.js"
